"""Fixtures of the plan-layer tests: a library root, a project directory, a git repository,
a SQLite database, all under pytest's tmp_path, and a check that nothing stays mounted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

import patchbox


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env)
    return out.stdout


def mounts_under(path: Path) -> list[str]:
    p = str(path.resolve())
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(p)]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The library's root; also $PATCHBOX_ROOT, so default roots land here, never in $HOME."""
    r = tmp_path / "root"
    monkeypatch.setenv("PATCHBOX_ROOT", str(r))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield r
    assert mounts_under(tmp_path) == [], "a mount was left behind"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    write(p / "notes.txt", "one\n")
    write(p / "src" / "main.py", "print('hi')\n")
    write(p / "old.txt", "old\n")
    return p


@pytest.fixture
def manager(root: Path) -> Iterator[patchbox.SandboxManager]:
    with patchbox.SandboxManager(root) as m:
        yield m


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    write(r / "README.md", "hello\n")
    write(r / "src" / "main.py", "print(1)\n")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "initial")
    return r
