"""Filesystem utilities of the plan executors' documentation
(``cleveragents.infrastructure.sandbox._fs_utils`` there): ``backup_directory``,
``safe_restore`` and ``compute_diff``.

patchbox's own strategies do not need them (their snapshots, commits and diffs are the
library's: deduplicated, crash-atomic, 3-way); they are here for code written against the
documented module. Paths may be ``str`` or ``os.PathLike``.
"""

from __future__ import annotations

import difflib
import os
import shutil
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

__all__ = ["backup_directory", "safe_restore", "compute_diff"]

_PathLike = Union[str, "os.PathLike[str]"]


def backup_directory(src: _PathLike, dst: _PathLike) -> Path:
    """Copies the tree ``src`` to ``dst`` (which must not exist), preserving permissions,
    timestamps and symlinks (links are copied as links, never followed); returns ``dst``."""
    src_p, dst_p = Path(src), Path(dst)
    if not src_p.is_dir():
        raise NotADirectoryError(f"backup_directory: {src_p} is not a directory")
    shutil.copytree(src_p, dst_p, symlinks=True, copy_function=shutil.copy2)
    return dst_p


def safe_restore(backup: _PathLike, original: _PathLike) -> None:
    """Puts the tree ``backup`` in place of ``original`` by renames: ``original`` is moved
    aside, ``backup`` renamed to it, then the old tree removed. At every instant ``original``
    is either the old tree or the whole backup (a failed rename puts the old tree back). A
    backup on another filesystem is first copied next to ``original`` (rename cannot cross
    filesystems). ``backup`` is consumed."""
    backup_p, original_p = Path(backup), Path(original)
    if not backup_p.is_dir():
        raise NotADirectoryError(f"safe_restore: backup {backup_p} is not a directory")
    parent = original_p.parent
    tag = uuid.uuid4().hex[:12]
    source = backup_p
    if os.stat(backup_p).st_dev != os.stat(parent).st_dev:
        source = parent / f".{original_p.name}.restore-{tag}"
        shutil.copytree(backup_p, source, symlinks=True, copy_function=shutil.copy2)
    aside: Optional[Path] = None
    if os.path.lexists(original_p):
        aside = parent / f".{original_p.name}.old-{tag}"
        os.rename(original_p, aside)
    try:
        os.rename(source, original_p)
    except BaseException:
        if aside is not None:
            os.rename(aside, original_p)
        raise
    if aside is not None:
        shutil.rmtree(aside)
    if source != backup_p:
        shutil.rmtree(backup_p)


def _files(root: Path) -> Dict[str, Path]:
    """Every file and symlink under ``root``, by ``/``-separated relative path (directories
    are not entries; symlinks are not followed)."""
    out: Dict[str, Path] = {}
    if not root.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        for name in filenames + [n for n in dirnames if (d / n).is_symlink()]:
            p = d / name
            out[p.relative_to(root).as_posix()] = p
    return out


def _content(p: Optional[Path]) -> Optional[bytes]:
    if p is None:
        return None
    if p.is_symlink():
        return os.readlink(p).encode()
    return p.read_bytes()


def _lines(data: bytes) -> List[str]:
    return data.decode("utf-8").splitlines(keepends=True)


def _hunks(a: List[str], b: List[str], old: str, new: str) -> Iterator[str]:
    for line in difflib.unified_diff(a, b, old, new, n=3):
        if line.endswith("\n"):
            yield line
        else:
            yield line + "\n\\ No newline at end of file\n"


def compute_diff(original: _PathLike, modified: _PathLike) -> str:
    """The unified diff that turns the tree ``original`` into the tree ``modified`` (``a/``
    and ``b/`` prefixes, ``/dev/null`` for added and deleted files, sorted by path), as
    ``patch -p1`` and ``git apply`` read it; ``""`` when the trees have the same content.
    A file that is not UTF-8 text is reported as ``Binary files a/x and b/x differ``."""
    a, b = _files(Path(original)), _files(Path(modified))
    out: List[str] = []
    for rel in sorted(set(a) | set(b)):
        before, after = _content(a.get(rel)), _content(b.get(rel))
        if before == after:
            continue
        old = f"a/{rel}" if before is not None else "/dev/null"
        new = f"b/{rel}" if after is not None else "/dev/null"
        try:
            pair: Tuple[List[str], List[str]] = (_lines(before or b""), _lines(after or b""))
        except UnicodeDecodeError:
            out.append(f"Binary files {old} and {new} differ\n")
            continue
        out.extend(_hunks(pair[0], pair[1], old, new))
    return "".join(out)
