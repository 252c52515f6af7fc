"""Shared helpers of the session-layer tests: a real git project in a temp directory, a
sandbox root beside it, a manager whose session is checked to leave nothing behind.

Every directory lives under pytest's ``tmp_path``; ``PATCHBOX_ROOT`` is pointed into it so
that even a call relying on the default root never reaches the real ``$HOME``.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
from typing import Dict, Iterator, List

import pytest

import patchbox

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(cwd: pathlib.Path, *args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, **GIT_ENV, HOME=str(cwd))
    return subprocess.run(["git", *args], cwd=cwd, env=env, input=input, capture_output=True, check=check)


def make_project(path: pathlib.Path, files: Dict[str, bytes] | None = None) -> pathlib.Path:
    """A git repository with `files` committed (a default set when None)."""
    path.mkdir(parents=True)
    files = files if files is not None else {
        "README.md": b"# demo\n",
        "src/main.py": b"def main():\n    return 1\n",
        "src/util.py": b"X = 1\nY = 2\nZ = 3\n",
        "data/blob.bin": bytes(range(256)),
        "old.txt": b"to be deleted\n",
    }
    for name, data in files.items():
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


def tree(path: pathlib.Path) -> Dict[str, bytes]:
    """Every file under `path` (not .git) with its bytes, by relative posix path."""
    out: Dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for n in filenames:
            p = pathlib.Path(dirpath, n)
            out[p.relative_to(path).as_posix()] = p.read_bytes()
    return out


def sessions_in(root: pathlib.Path) -> List[pathlib.Path]:
    """The session directories under a root (ULID-named)."""
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and len(p.name) == 26)


@pytest.fixture(autouse=True)
def _root_in_tmp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATCHBOX_ROOT", str(tmp_path / "default-root"))


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    return make_project(tmp_path / "project")


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "root"


@pytest.fixture
def mgr(project: pathlib.Path, root: pathlib.Path) -> Iterator[patchbox.SessionManager]:
    m = patchbox.SessionManager(project, root, prune_on_start=False)
    try:
        yield m
    finally:
        session = m.session_base
        m.close()
        # A closed session keeps nothing but pending patches.
        if session.exists():
            assert sorted(p.name for p in session.iterdir()) == ["pending", "session.meta"], list(session.iterdir())
