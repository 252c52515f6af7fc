"""CheckpointManager and SandboxCheckpoint: checkpoints at phases, list, restore, delete."""

from __future__ import annotations

import datetime
import os
import sqlite3
from pathlib import Path

import pytest

import patchbox
from patchbox import CheckpointManager, PRE_EXECUTE, POST_EXECUTE, PRE_APPLY
from _plan_fixtures import manager, project, repo, root, write  # noqa: F401


def test_checkpoint_and_rollback_to(manager, project, root):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    with CheckpointManager(root) as cps:
        before = cps.create_checkpoint(sb, "p", PRE_EXECUTE, {})
        assert before.phase == "pre_execute" and before.sandbox_id == sb.sandbox_id
        assert before.plan_id == "p" and len(before.checkpoint_id) == 26
        assert isinstance(before.created_at, datetime.datetime)
        assert Path(before.snapshot_path).exists()

        Path(sb.get_path("notes.txt")).write_text("step 1\n")
        write(Path(sb.get_path("added.txt")), "added\n")
        os.remove(sb.get_path("old.txt"))
        after = cps.create_checkpoint(sb, "p", POST_EXECUTE, {"status": "success"})
        assert after.metadata == {"status": "success"}

        Path(sb.get_path("notes.txt")).write_text("broken\n")
        os.remove(sb.get_path("added.txt"))
        assert cps.rollback_to(after)
        assert Path(sb.get_path("notes.txt")).read_text() == "step 1\n"
        assert Path(sb.get_path("added.txt")).read_text() == "added\n"
        assert not Path(sb.get_path("old.txt")).exists()

        assert cps.rollback_to(before)
        assert Path(sb.get_path("notes.txt")).read_text() == "one\n"
        assert not Path(sb.get_path("added.txt")).exists()
        assert Path(sb.get_path("old.txt")).read_text() == "old\n"
        assert len(sb.diff()) == 0

        listed = cps.list_checkpoints(sb.sandbox_id)
        assert [c.checkpoint_id for c in listed] == [before.checkpoint_id, after.checkpoint_id]
        assert cps.disk_bytes(sb.sandbox_id) > 0
        assert cps.delete_checkpoint(before.checkpoint_id)
        assert not cps.delete_checkpoint(before.checkpoint_id)
        assert not cps.rollback_to(before)  # gone
        assert [c.phase for c in cps.list_checkpoints(sb.sandbox_id)] == ["post_execute"]
        manifest = Path(after.snapshot_path)
    assert not manifest.exists()  # closing removed the checkpoints it made
    with pytest.raises(patchbox.SandboxError, match="closed"):
        cps.list_checkpoints(sb.sandbox_id)


def test_keep_and_attach_after_restart(manager, project, root):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    Path(sb.get_path("notes.txt")).write_text("checkpointed\n")
    cps = CheckpointManager(manager)  # a manager gives its root
    cp = cps.create_checkpoint(sb, "p", PRE_APPLY)
    cps.keep()
    cps.close()
    Path(sb.get_path("notes.txt")).write_text("later\n")
    again = CheckpointManager(root)
    again.attach(sb)
    [found] = again.list_checkpoints(sb.sandbox_id)
    assert found.checkpoint_id == cp.checkpoint_id and found.phase == "pre_apply"
    assert again.rollback_to(found)
    assert Path(sb.get_path("notes.txt")).read_text() == "checkpointed\n"
    again.close()


def test_rollback_to_a_committed_sandbox_is_refused(manager, project, root, repo):
    """Rolling back to a checkpoint is only for work not committed: on a committed sandbox
    every strategy raises SandboxStateError naming the sandbox and its status, and nothing
    changes; once the commit is undone, the rollback goes through."""
    with CheckpointManager(root) as cps:
        for resource, original, strategy in [
            ("docs", project, "copy_on_write"),
            ("repo", repo, "git_worktree"),
        ]:
            sb = manager.get_or_create_sandbox(resource, resource, original, strategy)
            notes = Path(sb.get_path("notes.txt"))
            notes.write_text("checkpointed\n")
            cp = cps.create_checkpoint(sb, resource, PRE_APPLY)
            notes.write_text("committed\n")
            manager.commit_all(resource)
            with pytest.raises(patchbox.SandboxStateError) as e:
                cps.rollback_to(cp)
            assert e.value.sandbox_id == sb.sandbox_id, strategy
            assert e.value.from_status == "committed", strategy
            assert (original / "notes.txt").read_text() == "committed\n", strategy
            assert notes.read_text() == "committed\n", strategy
            sb.rollback()
            assert cps.rollback_to(cp), strategy
            assert notes.read_text() == "checkpointed\n", strategy
    manager.cleanup_all("docs")
    manager.cleanup_all("repo")


def test_unknown_sandbox_and_none_strategy(manager, project, root):
    with CheckpointManager(root) as cps:
        sb = manager.get_or_create_sandbox("p", "api", project, "none")
        with pytest.raises(patchbox.SandboxError, match="cannot be checkpointed"):
            cps.create_checkpoint(sb, "p", PRE_EXECUTE)
        other = CheckpointManager(root)
        cow = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
        cp = other.create_checkpoint(cow, "p", PRE_EXECUTE)
        with pytest.raises(patchbox.SandboxError, match="attach"):
            cps.rollback_to(cp)
        other.close()


def test_sqlite_checkpoints_are_savepoints(manager, root, tmp_path):
    db = tmp_path / "app.db"
    c = sqlite3.connect(db)
    c.executescript("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a');")
    c.close()
    sb = manager.get_or_create_sandbox("p", "db", db, "transaction_rollback")
    with CheckpointManager(root) as cps:
        sb.execute("UPDATE t SET v = 'b'")
        cp = cps.create_checkpoint(sb, "p", PRE_EXECUTE)
        sb.execute("UPDATE t SET v = 'c'")
        assert cps.rollback_to(cp)
        assert sb.execute("SELECT v FROM t") == [("b",)]
    manager.cleanup_all("p")
