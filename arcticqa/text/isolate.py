"""Run one PDF extraction in a child process with a hard memory cap and a wall-clock kill.

PDFs are untrusted input. MuPDF cannot be interrupted inside one ``get_text`` call, and a
content stream of a few hundred KiB can inflate to gigabytes that the PDF lexer buffers whole
(a decompression bomb), so the in-process time check of :mod:`arcticqa.text.extract` cannot
bound it. Here the parent starts ``python -m arcticqa.text.isolate``, hands it the bytes on
stdin and the limits as JSON; the child caps its own address space (``RLIMIT_AS``) and CPU time
(``RLIMIT_CPU``) before it reads anything, extracts, and writes the Document as JSON on stdout.
The parent kills it when the wall-clock limit passes. Whatever happens to the child, the parent
returns a Document with a status (``timeout``, ``too_large``, ``corrupt``), never an exception,
so one hostile PDF costs one paper, not the build.

The child gets a minimal environment: no API keys are visible to the process that parses
untrusted files.
"""

from __future__ import annotations

import hashlib
import math
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":
    # The child never calls Page.get_layout(), the one user of pymupdf's optional layout
    # package, which pymupdf imports whenever it is installed: ~0.5 s of CPU per PDF, about
    # half of the child's start-up. Before pymupdf is imported, mark it absent.
    sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]

from pydantic import ValidationError  # noqa: E402

from arcticqa.config import ExtractionLimits  # noqa: E402
from arcticqa.evidence import Document  # noqa: E402
from arcticqa.text.extract import extract_pdf_bytes  # noqa: E402

__all__ = ["extract_isolated", "STARTUP_GRACE_S", "CHILD_ENV_KEYS"]

#: wall-clock allowance on top of ``time_limit_s`` for the child's interpreter start-up
STARTUP_GRACE_S = 15.0
#: the only environment variables the child inherits (locale, temp dir, search paths)
CHILD_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TEMP", "TMP", "SYSTEMROOT", "HOME")
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
_MEMORY_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in CHILD_ENV_KEYS}
    # the parent may run from a checkout that is not installed: let the child import the same code
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _failed(sha: str, status: str, message: str) -> Document:
    return Document(sha256=sha, status=status, message=message, stats={"isolated": True})


def extract_isolated(data: bytes, limits: ExtractionLimits) -> Document:
    """Extract ``data`` in a child process under ``limits``; failures are statuses, not exceptions."""
    sha = hashlib.sha256(data).hexdigest()
    wall = limits.time_limit_s + STARTUP_GRACE_S
    try:
        proc = subprocess.run([sys.executable, "-m", "arcticqa.text.isolate", limits.model_dump_json()],
                              input=data, capture_output=True, timeout=wall, env=_child_env(), check=False)
    except subprocess.TimeoutExpired:  # run() has killed the child already
        return _failed(sha, "timeout", f"extraction killed after {wall:.0f}s (time limit "
                       f"{limits.time_limit_s}s plus start-up)")
    tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    if proc.returncode == 0:
        try:
            document = Document.model_validate_json(proc.stdout)
        except ValidationError as exc:
            return _failed(sha, "corrupt", f"the extractor's output was unreadable: {exc.errors()[0]['msg']}")
        document.stats["isolated"] = True
        return document
    code = proc.returncode
    if code == -signal.SIGXCPU:
        return _failed(sha, "timeout", f"extraction used more than {math.ceil(limits.time_limit_s)}s of CPU")
    if "MemoryError" in tail[0] or (code < 0 and -code in _MEMORY_SIGNALS):
        return _failed(sha, "too_large", f"extraction exceeded the memory limit of {limits.memory_limit_mb} "
                       f"MB (exit {code}) {tail[0][:200]}".strip())
    return _failed(sha, "corrupt", f"the extractor process failed (exit {code}): {tail[0][:300]}")


def _limit_self(limits: ExtractionLimits) -> None:
    memory = limits.memory_limit_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = math.ceil(limits.time_limit_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def _main(argv: list[str]) -> int:
    limits = ExtractionLimits.model_validate_json(argv[1])
    _limit_self(limits)  # before the untrusted bytes are even read
    data = sys.stdin.buffer.read()
    document = extract_pdf_bytes(data, limits.model_copy(update={"isolate": False}))
    sys.stdout.buffer.write(document.model_dump_json().encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
