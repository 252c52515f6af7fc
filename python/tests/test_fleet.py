"""The Python face of the object store against a real S3-compatible server (SeaweedFS's ``weed
server -s3``, started by the ``weed`` fixture; without the binary these tests skip and say
why): an agent "machine" delivers pending patches with their provenance to a bucket; a
reviewer machine (another root, another HOME, its own copies of the project) lists, reads —
the record checked against ``patchbox pending show --json --store`` when the command is built —
applies onto a plain copy and, 3-way against the stored pre-images, onto a copy that moved on,
and drops; checkpoints taken on one machine are restored into a sandbox under another root.
Provenance given to ``deliver_pending_patch`` without a store is checked without a server."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
from typing import Any, Dict, Optional

import pytest

import patchbox
from patchbox import POST_EXECUTE, CheckpointManager
from session_fixtures import _root_in_tmp, make_project  # noqa: F401
from weed_server import Weed, weed  # noqa: F401

BIG = b"".join(b"line %d\n" % i for i in range(1, 21))
PROVENANCE: Dict[str, Any] = {
    "command": ["agent", "--task", "fix line 10"],
    "exit_status": 3,
    "started_ms": 1_700_000_000_000,
    "ended_ms": 1_700_000_004_200,
}


def cli() -> Optional[str]:
    given = os.environ.get("PATCHBOX_CLI")
    if given:
        return given
    built = pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "patchbox"
    return str(built) if built.is_file() else None


class Machine:
    """A machine: its own HOME and sandbox root (HOME is set while it works)."""

    def __init__(self, tmp: pathlib.Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home = tmp / name / "home"
        self.root = tmp / name / "root"
        self.home.mkdir(parents=True)
        self._monkeypatch = monkeypatch

    def enter(self) -> None:
        self._monkeypatch.setenv("HOME", str(self.home))


def test_pending_patches_travel_through_an_s3_bucket(
    weed: Weed, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = "s3://fleet/app"
    project = make_project(tmp_path / "project", {"big.txt": BIG, "notes.txt": b"one\n"})
    agent, reviewer = Machine(tmp_path, "agent", monkeypatch), Machine(tmp_path, "reviewer", monkeypatch)

    agent.enter()
    with patchbox.SessionManager(project, agent.root, prune_on_start=False, store=store) as m:
        session = m.session_id
        for delegation, name, data in (
            ("fix", "big.txt", BIG.replace(b"line 10\n", b"line ten\n")),
            ("notes", "notes.txt", b"one\ntwo\n"),
            ("unwanted", "notes.txt", b"rewritten\n"),
        ):
            sb = m.create_sandbox(delegation)
            (sb.path / name).write_bytes(data)
            d = m.deliver_pending_patch(delegation, m.finalize_sandbox(sb).patch, cwd=project, **PROVENANCE)
            m.discard_sandbox(sb)
            assert d.place == "stored" and d.id == f"{session}/{delegation}", d.error
    assert patchbox.list_pending(agent.root) == []  # nothing stayed local

    reviewer.enter()
    stored = patchbox.list_stored(store)
    assert [s.id for s in stored] == [f"{session}/fix", f"{session}/notes", f"{session}/unwanted"]
    assert stored[0].files == 1 and stored[0].project == project.resolve()
    assert b"+line ten" in patchbox.read_stored(f"{session}/fix", store=store)

    record = patchbox.stored_record("fix", store=store)  # a bare name will do
    assert record["id"] == f"{session}/fix"
    assert record["provenance"] == dict(PROVENANCE, cwd=str(project))
    assert [f["path"] for f in record["files"]] == ["big.txt"]
    assert record["patch_file"].startswith("s3://fleet/app/pending/patches/")
    assert "+line ten\n" in record["patch"]
    exe = cli()
    if exe is not None:  # the command prints the same record
        env = dict(os.environ, HOME=str(reviewer.home))
        out = subprocess.run(
            [exe, "pending", "show", "--json", "--store", store, "fix"], env=env, capture_output=True, check=True
        )
        assert json.loads(out.stdout) == record

    # Onto the reviewer's own copy as it was.
    copy = tmp_path / "reviewer" / "copy"
    shutil.copytree(project, copy)
    report = patchbox.apply_stored(f"{session}/notes", copy, store=store, root=reviewer.root)
    assert report.outcome == patchbox.Outcome.APPLIED
    assert (copy / "notes.txt").read_bytes() == b"one\ntwo\n"

    # Onto a copy that moved on around the hunk: only the stored pre-image lets it merge.
    moved = tmp_path / "reviewer" / "moved"
    moved.mkdir()
    moved_big = BIG.replace(b"line 8\n", b"line eight\n").replace(b"line 12\n", b"line twelve\n")
    (moved / "big.txt").write_bytes(moved_big)
    report = patchbox.apply_stored(f"{session}/fix", moved, store=store, root=reviewer.root)
    assert report.outcome == patchbox.Outcome.APPLIED
    assert (moved / "big.txt").read_bytes() == moved_big.replace(b"line 10\n", b"line ten\n")
    assert (project / "big.txt").read_bytes() == BIG  # the agent's project untouched

    # Applied patches left the store; the unwanted one is dropped.
    assert [s.id for s in patchbox.list_stored(store)] == [f"{session}/unwanted"]
    patchbox.drop_stored(f"{session}/unwanted", store=store)
    assert patchbox.list_stored(store) == []
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.stored_record("unwanted", store=store)
    assert e.value.kind == "pending"


def test_checkpoints_in_an_s3_bucket_are_restored_under_another_root(
    weed: Weed, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = "s3://fleet/ckpt"
    project = make_project(tmp_path / "project", {"big.txt": BIG, "notes.txt": b"one\n"})
    other_project = tmp_path / "reviewer-project"
    shutil.copytree(project, other_project)
    agent, reviewer = Machine(tmp_path, "agent", monkeypatch), Machine(tmp_path, "reviewer", monkeypatch)

    agent.enter()
    with patchbox.SandboxManager(agent.root) as a:
        sb = a.get_or_create_sandbox("p", "app", project, "copy_on_write")
        pathlib.Path(sb.get_path("notes.txt")).write_text("step 1\n")
        added = pathlib.Path(sb.get_path("new/added.txt"))
        added.parent.mkdir(parents=True)
        added.write_text("added\n")
        pathlib.Path(sb.get_path("big.txt")).unlink()
        with CheckpointManager(agent.root, store=store) as cps:
            cp = cps.create_checkpoint(sb, "p", POST_EXECUTE, {"by": "agent"})
        a.cleanup_all("p")  # the agent's sandbox and local checkpoints are gone

    reviewer.enter()
    with patchbox.SandboxManager(reviewer.root) as b:
        sb2 = b.get_or_create_sandbox("p", "app", other_project, "copy_on_write")
        with CheckpointManager(reviewer.root, store=store) as cps:
            listed = cps.list_stored()
            assert [(c.checkpoint_id, c.plan_id) for c in listed] == [(cp.checkpoint_id, "p")]
            restored = cps.restore_from_store(sb2, cp.checkpoint_id)
            assert restored is not None and restored.metadata == {"by": "agent"}
            assert pathlib.Path(sb2.get_path("notes.txt")).read_text() == "step 1\n"
            assert pathlib.Path(sb2.get_path("new/added.txt")).read_text() == "added\n"
            assert not pathlib.Path(sb2.get_path("big.txt")).exists()
            assert (other_project / "notes.txt").read_text() == "one\n"  # the original untouched
            # Deleted from the store with what nothing references any more.
            assert cps.delete_checkpoint(cp.checkpoint_id)
            assert cps.list_stored() == []
            assert cps.restore_from_store(sb2, cp.checkpoint_id) is None
        b.cleanup_all("p")


def test_provenance_given_to_deliver_is_in_the_local_record(tmp_path: pathlib.Path) -> None:
    project = make_project(tmp_path / "project", {"notes.txt": b"one\n"})
    root = tmp_path / "root"
    with patchbox.SessionManager(project, root, prune_on_start=False) as m:
        sb = m.create_sandbox("d1")
        (sb.path / "notes.txt").write_bytes(b"changed\n")
        d = m.deliver_pending_patch("d1", m.finalize_sandbox(sb).patch, cwd=project, **PROVENANCE)
        m.discard_sandbox(sb)
    assert d.place == "local" and d.path is not None
    assert patchbox.pending_record("d1", root=root)["provenance"] == dict(PROVENANCE, cwd=str(project))
