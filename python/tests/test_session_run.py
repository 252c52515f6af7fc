"""SessionManager.run: a tool runs in its sandbox (never in the process's cwd), its output
captured, and — where the kernel has Landlock — it cannot write into the user's project."""

from __future__ import annotations

import os
import pathlib

import pytest

import patchbox
from session_fixtures import _root_in_tmp, mgr, project, root, tree  # noqa: F401


def test_a_tool_runs_in_the_sandbox(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    sb = mgr.create_sandbox("tool")
    cwd = os.getcwd()
    done = mgr.run(sb, ["sh", "-c", 'echo made > made.txt; echo "$PATCHBOX_SANDBOX $GREETING"; cat; echo err >&2; exit 3'],
                   env={"GREETING": "hello"}, input=b"from stdin\n")
    assert done.returncode == 3
    assert done.stdout == f"{sb.path} hello\nfrom stdin\n".encode()
    assert done.stderr == b"err\n"
    assert done.args == ["sh", "-c", done.args[2]]
    assert os.getcwd() == cwd
    assert mgr.finalize_sandbox(sb).added == ["made.txt"]
    assert not (project / "made.txt").exists()


def test_a_missing_program_raises_with_its_name(mgr: patchbox.SessionManager) -> None:
    sb = mgr.create_sandbox("tool")
    with pytest.raises(patchbox.PatchboxError) as e:
        mgr.run(sb, ["no-such-program-xyz"])
    assert e.value.kind == "io" and "no-such-program-xyz" in str(e.value)
    with pytest.raises(ValueError):
        mgr.run(sb, [])


def test_a_killed_tool_reports_the_signal(mgr: patchbox.SessionManager) -> None:
    sb = mgr.create_sandbox("tool")
    assert mgr.run(sb, ["sh", "-c", "kill -9 $$"]).returncode == -9


def test_a_confined_tool_cannot_write_into_the_project(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    sb = mgr.create_sandbox("tool")
    before = tree(project)
    done = mgr.run(sb, ["sh", "-c", 'echo evil > "$PATCHBOX_PROJECT/evil.txt"'])
    if mgr.confinement() != "enforced":
        # No Landlock here: the write is the caller's risk, as documented; undo it.
        assert mgr.confinement().startswith("unavailable")
        (project / "evil.txt").unlink(missing_ok=True)
        return
    assert done.returncode != 0 and b"ermission denied" in done.stderr
    assert tree(project) == before


def test_confine_false_turns_confinement_off(project: pathlib.Path, root: pathlib.Path) -> None:
    with patchbox.SessionManager(project, root, prune_on_start=False, confine=False) as m:
        assert m.confinement() == "off"
        sb = m.create_sandbox("tool")
        assert m.run(sb, ["true"]).returncode == 0
