"""The plan records from Python, read as a plugin reads them: ``SandboxManager.plan_records``
and ``diff_records`` (what ``patchbox plan list --json`` and ``plan diff --json`` print) and
``CommitResult.to_record()`` (one element of ``plan commit --json``), checked against the
manager's own answers and the files on disk, and against the ``patchbox`` command's output
when it is built (``$PATCHBOX_CLI``, else the repository's ``target/debug/patchbox``)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

import pytest

import patchbox
from patchbox.plan import CommitResult
from _plan_fixtures import manager, project, root, write  # noqa: F401


def cli() -> Optional[str]:
    given = os.environ.get("PATCHBOX_CLI")
    if given:
        return given
    built = Path(__file__).resolve().parents[2] / "target" / "debug" / "patchbox"
    return str(built) if built.is_file() else None


def run_cli(root: Path, *args: str) -> Any:
    exe = cli()
    if exe is None:
        pytest.skip("the patchbox command is not built (cargo build, or set PATCHBOX_CLI)")
    out = subprocess.run([exe, "plan", *args, "--root", str(root)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def edit(manager: patchbox.SandboxManager, project: Path, plan: str = "p1") -> patchbox.plan.Sandbox:
    """notes.txt changed (one line added), added.txt new (one line), old.txt deleted."""
    sb = manager.get_or_create_sandbox(plan, "proj", project, "copy_on_write")
    write(Path(sb.get_path("notes.txt")), "one\ntwo\n")
    write(Path(sb.get_path("added.txt")), "new\n")
    Path(sb.get_path("old.txt")).unlink()
    return sb


def millis(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)


def test_plan_records_name_each_plan_and_its_sandboxes(manager: patchbox.SandboxManager, project: Path) -> None:
    sb = edit(manager, project)
    manager.get_or_create_sandbox("p2", "proj", project, "copy_on_write")
    assert sorted(r["plan"] for r in manager.plan_records()) == ["p1", "p2"]
    [rec] = manager.plan_records("p1")
    assert rec["plan"] == "p1"
    [s] = rec["sandboxes"]
    ctx = sb.context
    assert ctx is not None
    assert s == {
        "sandbox_id": sb.sandbox_id,
        "strategy": "copy_on_write",
        "status": "active",
        "resource_id": "proj",
        "original_path": ctx.original_path,
        "sandbox_path": ctx.sandbox_path,
    }
    assert Path(s["sandbox_path"], "added.txt").read_text() == "new\n"
    # A plan with no sandboxes is a record with none, as the CLI prints it.
    assert manager.plan_records("nothing") == [{"plan": "nothing", "sandboxes": []}]


def test_diff_records_count_lines_per_file_and_carry_the_patch(
    manager: patchbox.SandboxManager, project: Path
) -> None:
    sb = edit(manager, project)
    [d] = manager.diff_records("p1")
    assert (d["plan"], d["sandbox_id"], d["resource_id"]) == ("p1", sb.sandbox_id, "proj")
    files = {f["path"]: (f["change"], f["insertions"], f["deletions"], f["hunks"]) for f in d["files"]}
    assert files == {
        "added.txt": ("added", 1, 0, 1),
        "notes.txt": ("modified", 1, 0, 1),
        "old.txt": ("deleted", 0, 1, 1),
    }
    assert d["patch"] == sb.diff().patch.decode()
    manager.commit_all("p1")
    assert manager.diff_records("p1") == []


def test_records_equal_the_commands_json(manager: patchbox.SandboxManager, project: Path, root: Path) -> None:
    edit(manager, project)
    assert run_cli(root, "list", "--json") == manager.plan_records()
    assert run_cli(root, "list", "--json", "p1") == manager.plan_records("p1")
    assert run_cli(root, "diff", "--json", "p1") == manager.diff_records("p1")


def test_commit_result_to_record(manager: patchbox.SandboxManager, project: Path, root: Path) -> None:
    edit(manager, project)
    [r] = manager.commit_all("p1", command=["agent", "--fix"], exit_status=0)
    assert (project / "added.txt").read_text() == "new\n"
    rec = r.to_record()
    assert rec == {
        "sandbox_id": r.sandbox_id,
        "success": True,
        "commit_ref": r.commit_ref,
        "changed_files": ["notes.txt"],
        "added_files": ["added.txt"],
        "deleted_files": ["old.txt"],
        "error": None,
        "timestamp": millis(r.timestamp),
        "metadata": r.metadata,
    }
    assert json.loads(rec["metadata"]["provenance.command"]) == ["agent", "--fix"]

    # A failed result's ids go back to the library's comma-separated text.
    failed = CommitResult(sandbox_id="s", success=False, error="conflict", metadata={"rolled_back_ids": ["a", "b"]})
    assert failed.to_record()["metadata"] == {"rolled_back_ids": "a,b"}
    assert failed.to_record()["error"] == "conflict"

    # The command's records of a commit have the same fields, of the same kinds.
    (project / "notes.txt").write_text("one\n")
    sb = manager.get_or_create_sandbox("p3", "proj", project, "copy_on_write")
    write(Path(sb.get_path("notes.txt")), "one\nthree\n")
    manager.close()
    [by_cli] = run_cli(root, "commit", "--json", "p3")
    assert {k: type(v) for k, v in by_cli.items() if v is not None} == {
        k: type(v) for k, v in rec.items() if v is not None
    }
    assert (project / "notes.txt").read_text() == "one\nthree\n"
