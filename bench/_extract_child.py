"""Child of bench_extract: times the ``arcticqa`` found first on ``sys.path`` on the given PDFs.

Run by file path with ``PYTHONPATH`` set to a tree of the code to time, so an older revision can
be timed beside the working tree in one run. Prints one JSON line: the module's path, the pages,
and the best total over the repeats.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> None:
    repeats = int(sys.argv[1])
    datas = [Path(p).read_bytes() for p in sys.argv[2:]]
    import arcticqa.text.extract as extract

    best = float("inf")
    pages = 0
    for _ in range(repeats):
        started = time.perf_counter()
        pages = sum(extract.extract_pdf_bytes(data).pages for data in datas)
        best = min(best, time.perf_counter() - started)
    print(json.dumps({"module": extract.__file__, "pages": pages, "seconds": best}))


if __name__ == "__main__":
    main()
