"""Review and accept from Python, as an IDE plugin would: read the pending records (the same
JSON as the CLI's), accept some hunks, apply the rest later, undo both."""

from __future__ import annotations

import json
import pathlib

import pytest

import patchbox
from session_fixtures import _root_in_tmp, make_project, root, tree  # noqa: F401

LINES = b"".join(b"%d\n" % i for i in range(1, 31))


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    return make_project(tmp_path / "project", {"a.txt": LINES, "b.txt": b"hi\n"})


def leave_pending(project: pathlib.Path, root: pathlib.Path) -> str:
    """Two hunks in a.txt (lines 2 and 28), one in b.txt, stored with its provenance."""
    m = patchbox.SessionManager(project, root, prune_on_start=False)
    try:
        sb = m.create_sandbox("task")
        (sb.path / "a.txt").write_bytes(LINES.replace(b"\n2\n", b"\ntwo\n").replace(b"\n28\n", b"\ntwenty-eight\n"))
        (sb.path / "b.txt").write_bytes(b"hi\nthere\n")
        patch = m.finalize_sandbox(sb).patch
        path = m.write_pending_patch(
            "task", patch, command=["agent", "--fix"], cwd=project, exit_status=0, started_ms=10, ended_ms=20
        )
        m.discard_sandbox(sb)
        return f"{m.session_id}/{path.stem}"
    finally:
        m.close()


def test_records_name_the_files_and_what_ran(project: pathlib.Path, root: pathlib.Path) -> None:
    pid = leave_pending(project, root)
    [rec] = patchbox.pending_records(root)
    assert rec["id"] == pid and rec["origin"] == "delegation"
    assert rec["provenance"] == {
        "command": ["agent", "--fix"],
        "cwd": str(project),
        "exit_status": 0,
        "started_ms": 10,
        "ended_ms": 20,
    }
    assert [(f["path"], f["change"], f["insertions"], f["deletions"], f["hunks"]) for f in rec["files"]] == [
        ("a.txt", "modified", 2, 2, 2),
        ("b.txt", "modified", 1, 0, 1),
    ]
    shown = patchbox.pending_record(pid, root=root)
    assert shown["patch"].startswith("diff --git a/a.txt b/a.txt\n")
    assert {k: v for k, v in shown.items() if k != "patch"} == rec
    [s] = [s for s in patchbox.session_records(root) if pid.startswith(s["id"])]
    assert s["pending"] == 1
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.pending_record("nope", root=root)
    assert e.value.kind == "pending"


def test_some_hunks_now_the_rest_later_then_undo(project: pathlib.Path, root: pathlib.Path) -> None:
    pid = leave_pending(project, root)
    before = tree(project)
    part = patchbox.apply_pending_selected(pid, root=root, hunks=["a.txt:2"])
    assert part.report.outcome == patchbox.Outcome.APPLIED
    assert part.remaining is not None and part.remaining != pid
    record = json.loads(part.to_json())
    assert record["pending_id"] == pid and record["remaining"] == part.remaining
    assert [f["path"] for f in record["files"]] == ["a.txt"]
    a = (project / "a.txt").read_bytes()
    assert b"\n2\n" in a and b"\ntwenty-eight\n" in a
    assert (project / "b.txt").read_bytes() == b"hi\n"
    [rest] = patchbox.pending_records(root)
    assert rest["origin"] == "split" and rest["split_from"] == pid
    assert rest["provenance"]["command"] == ["agent", "--fix"]

    report = patchbox.apply_pending(part.remaining, root=root)
    assert json.loads(report.to_json())["outcome"] == "applied"
    assert (project / "a.txt").read_bytes() == LINES.replace(b"\n2\n", b"\ntwo\n").replace(b"\n28\n", b"\ntwenty-eight\n")
    assert (project / "b.txt").read_bytes() == b"hi\nthere\n"
    assert patchbox.pending_records(root) == []

    store = patchbox.UndoStore(root)
    store.undo_last(project)
    store.undo_last(project)
    assert tree(project) == before


def test_files_by_path_and_a_bad_selection(project: pathlib.Path, root: pathlib.Path) -> None:
    pid = leave_pending(project, root)
    for bad in ({"only": ["nope"]}, {"hunks": ["a.txt:7"]}, {"hunks": ["a.txt"]}):
        with pytest.raises(patchbox.PatchboxError) as e:
            patchbox.apply_pending_selected(pid, root=root, **bad)  # type: ignore[arg-type]
        assert e.value.kind == "pending"
    assert (project / "a.txt").read_bytes() == LINES
    part = patchbox.apply_pending_selected(pid, root=root, exclude=["a.txt"])
    assert (project / "b.txt").read_bytes() == b"hi\nthere\n"
    assert (project / "a.txt").read_bytes() == LINES
    [rest] = patchbox.pending_records(root)
    assert rest["id"] == part.remaining and [f["path"] for f in rest["files"]] == ["a.txt"]


def test_plan_commits_carry_the_callers_provenance(project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    manager = patchbox.SandboxManager(tmp_path / "plans-root")
    sb = manager.get_or_create_sandbox("p", "proj", project, "copy_on_write")
    pathlib.Path(sb.get_path("b.txt")).write_bytes(b"hi\nplan\n")
    [result] = manager.commit_all("p", command=["agent", "run it"], cwd=project, exit_status=0, started_ms=5, ended_ms=9)
    assert (project / "b.txt").read_bytes() == b"hi\nplan\n"
    m = result.metadata
    assert json.loads(m["provenance.command"]) == ["agent", "run it"]
    assert m["provenance.cwd"] == str(project)
    assert (m["provenance.exit_status"], m["provenance.started_ms"], m["provenance.ended_ms"]) == ("0", "5", "9")
