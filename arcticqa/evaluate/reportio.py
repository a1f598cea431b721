"""Shared report plumbing for the evaluator's protocols: CSV text and atomic report folders.

A report folder is written to a temporary sibling and renamed into place (the previous folder
is moved aside first and removed afterwards), so a failed run never leaves a half-written
report — the same scheme as :func:`arcticqa.evaluate.report.write_report`.
"""

from __future__ import annotations

import csv
import io
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["csv_text", "f6", "write_report_folder"]


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def f6(value: float | None) -> str:
    """Six decimals (the evaluator's CSV number format); empty for a missing value."""
    if value is None or value != value:  # None or NaN
        return ""
    return f"{value:.6f}"


def write_report_folder(out_dir: Path | str, texts: Mapping[str, str],
                        figures: Sequence[Callable[[Path], None]] = ()) -> Path:
    """Write ``texts`` (file name -> content) and call each figure writer with the staging folder;
    then swap the folder into ``out_dir`` as a whole."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        for draw in figures:
            draw(staging)
        previous = None
        if out_dir.exists():
            previous = out_dir.with_name(f".{out_dir.name}.old-{staging.name[-8:]}")
            out_dir.rename(previous)
        staging.rename(out_dir)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir
