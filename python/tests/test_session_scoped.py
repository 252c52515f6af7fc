"""ScopedSandbox points an engine's tools at a sandbox for a with block and back — also
when the block raises; the process's own working directory is never touched."""

from __future__ import annotations

import os
import pathlib
from typing import List

import pytest

import patchbox
from session_fixtures import _root_in_tmp, mgr, project, root  # noqa: F401


class ToolRunner:
    """What an engine re-points: the directory its tools run in."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.calls: List[str] = []

    def swap(self, path: str) -> None:
        self.calls.append(path)
        self.cwd = path


def test_the_block_runs_in_the_sandbox_and_the_directory_comes_back(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    sb = mgr.create_sandbox("tool")
    runner = ToolRunner(str(project))
    process_cwd = os.getcwd()
    with patchbox.ScopedSandbox(runner.swap, sb, project) as g:
        assert runner.cwd == str(sb.path) == g.sandbox_path
        assert g.original_path == str(project)
        pathlib.Path(runner.cwd, "made-by-tool.txt").write_bytes(b"x\n")
        assert os.getcwd() == process_cwd
    assert runner.cwd == str(project)
    assert mgr.finalize_sandbox(sb).added == ["made-by-tool.txt"]


def test_the_directory_comes_back_when_the_block_raises(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    sb = mgr.create_sandbox("tool")
    runner = ToolRunner(str(project))
    with pytest.raises(ValueError, match="tool failed"):
        with patchbox.ScopedSandbox(runner.swap, sb.path, project):
            raise ValueError("tool failed")
    assert runner.cwd == str(project)
    assert runner.calls == [str(sb.path), str(project)]


def test_keep_leaves_the_tools_in_the_sandbox(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    sb = mgr.create_sandbox("tool")
    runner = ToolRunner(str(project))
    with patchbox.ScopedSandbox(runner.swap, sb, project) as g:
        g.keep()
    assert runner.cwd == str(sb.path)


def test_no_swap_function_is_a_no_op(project: pathlib.Path) -> None:
    with patchbox.ScopedSandbox(None, "/sandbox", project) as g:
        assert g.sandbox_path == "/sandbox"


def test_a_failing_first_swap_propagates_and_restores_nothing(project: pathlib.Path) -> None:
    calls: List[str] = []

    def swap(p: str) -> None:
        calls.append(p)
        raise OSError("cannot switch")

    with pytest.raises(OSError, match="cannot switch"):
        with patchbox.ScopedSandbox(swap, "/sandbox", project):
            pass  # pragma: no cover
    assert calls == ["/sandbox"]


def test_a_failing_restore_does_not_hide_the_blocks_exception(project: pathlib.Path) -> None:
    def swap(p: str) -> None:
        if p == str(project):
            raise OSError("restore failed")

    with pytest.raises(KeyError):
        with patchbox.ScopedSandbox(swap, "/sandbox", project):
            raise KeyError("block")
    with pytest.raises(OSError, match="restore failed"):
        with patchbox.ScopedSandbox(swap, "/sandbox", project):
            pass
