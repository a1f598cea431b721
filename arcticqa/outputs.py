"""The one way every command writes its outputs: never over someone else's work.

The rule (docs/reliability.md, "Writers"): a command writes a file or a folder. An existing file,
or a folder that is not empty, is refused with one line (exit 2) unless ``--overwrite`` is given;
with ``--overwrite`` only the command's own outputs are replaced, so a folder holding anything
the command would not have written (a user's notes, a thesis) is refused even then. Every write
goes to a temporary sibling first and is renamed into place, so a failure leaves the target as
it was. Files are created 0666 and folders 0777, less the user's umask (0644/0755 under the
usual 022), not the 0600/0700 of the temporary-file functions. An ``OSError`` becomes one
:class:`OutputError` line naming the path.

User-supplied text that lands in an output is made inert here too: :func:`csv_cell` for every
CSV cell (spreadsheet formulas), :func:`md_text` / :func:`md_code` for Markdown.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arcticqa.errors import OutputError

__all__ = ["check_file_target", "check_folder_target", "write_file", "write_folder", "os_errors", "csv_cell",
           "md_text", "md_code"]

_TMP_PREFIX = ".arcticqa-tmp-"  # short: the temporary name must fit wherever the final one fits


@contextmanager
def os_errors(path: Path | str) -> Iterator[None]:
    """Turn an ``OSError`` raised inside into one :class:`OutputError` line naming ``path``."""
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = exc.filename if exc.filename and _TMP_PREFIX not in str(exc.filename) else path
        raise OutputError(f"cannot write {where}: {reason}") from exc


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _publish_modes(root: Path) -> None:
    """Give a staged file or tree the modes a plain ``open``/``mkdir`` would have given it."""
    mask = _umask()
    if root.is_file():
        root.chmod(0o666 & ~mask)
        return
    for folder, dirs, files in os.walk(root):
        for name in files:
            (Path(folder) / name).chmod(0o666 & ~mask)
        for name in dirs:
            (Path(folder) / name).chmod(0o777 & ~mask)
    root.chmod(0o777 & ~mask)


def _probe_writable(path: Path) -> None:
    """Fail now, not after an hour of work, when the target's nearest existing folder is not one
    or cannot be written (read-only file system, no permission)."""
    ancestor = path.absolute().parent
    while not ancestor.exists() and not ancestor.is_symlink() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"cannot write {path}: {ancestor} is not a folder")
    fd, probe = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=ancestor)
    os.close(fd)
    os.unlink(probe)


def check_file_target(path: Path | str, *, overwrite: bool) -> Path:
    """Refuse a target that is a folder, or an existing file without ``overwrite``. Call it before
    the work, so a refused target costs nothing; :func:`write_file` checks again."""
    path = Path(path)
    with os_errors(path):
        if path.is_dir() and not path.is_symlink():
            raise OutputError(f"{path} is a folder; give a file name")
        if (path.exists() or path.is_symlink()) and not overwrite:
            raise OutputError(f"{path} exists; pass --overwrite to replace it")
        _probe_writable(path)
    return path


def write_file(path: Path | str, data: bytes | str, *, overwrite: bool) -> Path:
    """Write one output file atomically (an existing symlink is replaced, never written through)."""
    path = check_file_target(path, overwrite=overwrite)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with os_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
            _publish_modes(Path(tmp))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return path


def _foreign(folder: Path, own: Collection[str]) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name not in own)


def check_folder_target(path: Path | str, *, overwrite: bool, own: Collection[str]) -> Path:
    """Refuse a target that is a file, a non-empty folder without ``overwrite``, or a folder
    holding anything but ``own`` names (the outputs this command writes) even with it."""
    path = Path(path)
    with os_errors(path):
        if path.is_symlink() and not path.is_dir():
            raise OutputError(f"{path} is a link to something that is not a folder")
        if path.exists() and not path.is_dir():
            raise OutputError(f"{path} exists and is not a folder")
        if not path.is_dir():
            _probe_writable(path)
            return path
        entries = os.listdir(path)
        if entries and not overwrite:
            raise OutputError(f"{path} is not empty; pass --overwrite to replace this command's own outputs "
                              "in it")
        if entries and not path.is_symlink():
            foreign = _foreign(path, own)
            if foreign:
                more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
                raise OutputError(f"{path} holds {foreign[0]!r}{more}, which this command did not write; "
                                  "move it away or choose another folder")
        _probe_writable(path / "x")
    return path


def write_folder(path: Path | str, fill: Callable[[Path], None], *, overwrite: bool,
                 own: Collection[str]) -> Path:
    """Fill a temporary sibling folder with ``fill(staging)``, then put it in place as a whole.

    An existing target (allowed by :func:`check_folder_target`) is swapped out and removed only
    after the new folder is in; a symlinked target is replaced as a link, never followed. The
    current directory and mount points cannot be renamed, so there the staged files are moved in
    one by one instead.
    """
    path = check_folder_target(path, overwrite=overwrite, own=own)
    target = path.absolute()
    with os_errors(path):
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=target.parent))
        try:
            fill(staging)
            _publish_modes(staging)
            _install(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return path


def _install(staging: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink() and (
            os.path.ismount(target) or target.resolve() == Path.cwd().resolve()):
        for entry in sorted(staging.iterdir()):
            os.replace(entry, target / entry.name)
        staging.rmdir()
        return
    if not (target.exists() or target.is_symlink()) or (not target.is_symlink() and not os.listdir(target)):
        os.replace(staging, target)  # POSIX rename replaces an empty folder
        return
    backup = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=target.parent))
    backup.rmdir()
    os.replace(target, backup)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(backup, target)
        raise
    if backup.is_symlink():  # the old target was a link: drop the link, never what it points at
        backup.unlink()
    else:
        shutil.rmtree(backup, ignore_errors=True)  # does not follow symlinks inside


# -- text that goes into outputs ------------------------------------------------------------
#: a cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets
#: (OWASP "CSV injection"): ``=cmd|' /C calc'!A0``, ``@SUM(1+1)*cmd|…``, ``+m2``
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
#: Markdown's inline syntax characters, and the table-cell separator
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]{}|~])")


def csv_cell(value: Any) -> Any:
    """A cell as a spreadsheet will show it, never run it: text that starts like a formula gets a
    leading ``'`` (OWASP's advice); numbers such as ``-0.015000`` are left alone (not formulas)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def md_text(value: Any) -> str:
    """User-supplied text (a model label, a prompt variant) for a Markdown table cell: HTML is
    escaped (``<script>`` shows as text), Markdown syntax and ``|`` are backslash-escaped, and
    line breaks, which would end the table row, become spaces."""
    text = html.escape(str(value), quote=False)
    return " ".join(_MARKDOWN_SPECIAL.sub(r"\\\1", text).split())


def md_code(value: Any) -> str:
    """User-supplied text as a Markdown code span (a file name): backticks cannot close it early."""
    return "`" + " ".join(str(value).replace("`", "'").split()) + "`"
