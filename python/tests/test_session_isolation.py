"""Isolation and the private repository, chosen from Python: both isolations give the same
patch, the mode says what a sandbox got, bad names are refused, git_repo=False has no .git."""

from __future__ import annotations

import os
import pathlib

import pytest

import patchbox
from session_fixtures import _root_in_tmp, git, project, root  # noqa: F401


def work(mgr: patchbox.SessionManager) -> bytes:
    sb = mgr.create_sandbox("task")
    (sb.path / "src/util.py").write_bytes(b"X = 1\nY = 20\nZ = 3\n")
    (sb.path / "fresh.txt").write_bytes(b"new\n")
    patch = mgr.finalize_sandbox(sb).patch
    mgr.discard_sandbox(sb)
    return patch


def test_copy_and_auto_give_the_same_patch(project: pathlib.Path, root: pathlib.Path) -> None:
    patches = {}
    for isolation in ("copy", "auto"):
        with patchbox.SessionManager(project, root / isolation, prune_on_start=False, isolation=isolation) as mgr:
            sb = mgr.create_sandbox("probe")
            mode = sb.mode
            assert mgr.isolation_mode() == mode
            if isolation == "copy":
                assert mode == "copy"
            else:
                assert mode in ("copy", "kernel-overlay", "fuse-overlay")
                if os.geteuid() == 0:
                    assert mode == "kernel-overlay", "root may mount: auto should give the kernel's overlay"
            mgr.discard_sandbox(sb)
            patches[isolation] = work(mgr)
    assert patches["copy"] == patches["auto"]
    assert b"fresh.txt" in patches["copy"]


def test_an_unknown_isolation_is_refused(project: pathlib.Path, root: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="isolation must be"):
        patchbox.SessionManager(project, root, prune_on_start=False, isolation="tmpfs")  # type: ignore[arg-type]


def test_git_repo_false_makes_sandboxes_without_git(project: pathlib.Path, root: pathlib.Path) -> None:
    with patchbox.SessionManager(project, root / "on", prune_on_start=False) as mgr:
        sb = mgr.create_sandbox("with")
        assert (sb.path / ".git").is_dir()
        assert git(sb.path, "status", "--porcelain").stdout == b""
        mgr.discard_sandbox(sb)
    with patchbox.SessionManager(project, root / "off", prune_on_start=False, git_repo=False) as mgr:
        sb = mgr.create_sandbox("without")
        assert not (sb.path / ".git").exists()
        mgr.discard_sandbox(sb)
