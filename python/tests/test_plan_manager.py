"""SandboxManager and Sandbox over real directories: isolation, diff, commit_all, rollback,
cleanup, lookup, boundaries, context managers, errors."""

from __future__ import annotations

import datetime
import os
import threading
from pathlib import Path

import pytest

import patchbox
from patchbox import SandboxManager, SandboxStatus, SandboxStrategy
from _plan_fixtures import manager, project, root, write  # noqa: F401


def test_writes_stay_in_the_sandbox_until_commit_all(manager, project):
    sb = manager.get_or_create_sandbox("plan-1", "docs", project, "copy_on_write")
    assert sb.status == SandboxStatus.CREATED
    Path(sb.get_path("notes.txt")).write_text("two\n")
    os.remove(sb.get_path("old.txt"))
    write(Path(sb.get_path("new/file.txt")), "new\n")
    assert sb.status == SandboxStatus.ACTIVE
    assert (project / "notes.txt").read_text() == "one\n"
    assert (project / "old.txt").exists()

    diff = sb.diff()
    assert [(e.path, e.operation) for e in diff.entries] == [
        ("new/file.txt", "added"), ("notes.txt", "modified"), ("old.txt", "deleted")]
    notes = diff.entries[1]
    assert (notes.before, notes.after) == (b"one\n", b"two\n")
    assert diff.summary == "1 added, 1 modified, 1 deleted"
    assert b"diff --git a/notes.txt b/notes.txt" in diff.patch

    results = manager.commit_all("plan-1")
    assert len(results) == 1
    r = results[0]
    assert r.success and r.error is None and r.sandbox_id == sb.sandbox_id
    assert r.changed_files == ["notes.txt"]
    assert r.added_files == ["new/file.txt"]
    assert r.deleted_files == ["old.txt"]
    assert r.commit_ref
    assert isinstance(r.timestamp, datetime.datetime) and r.timestamp.tzinfo is not None
    assert (project / "notes.txt").read_text() == "two\n"
    assert (project / "new" / "file.txt").read_text() == "new\n"
    assert not (project / "old.txt").exists()
    assert sb.status == SandboxStatus.COMMITTED

    sb.rollback()  # after commit: the commit is undone in the original
    assert (project / "notes.txt").read_text() == "one\n"
    assert (project / "old.txt").read_text() == "old\n"
    assert not (project / "new").exists()
    assert sb.status == SandboxStatus.ROLLED_BACK
    manager.cleanup_all("plan-1")
    assert sb.status == SandboxStatus.CLEANED_UP
    assert manager.list_sandboxes("plan-1") == []


def test_context_and_identity(manager, project):
    sb = manager.get_or_create_sandbox("p", "docs", project, SandboxStrategy.COPY_ON_WRITE)
    ctx = sb.context
    assert ctx is not None
    assert ctx.sandbox_id == sb.sandbox_id and ctx.plan_id == "p" and ctx.resource_id == "docs"
    assert Path(ctx.original_path) == project.resolve() or Path(ctx.original_path) == project
    assert Path(ctx.sandbox_path).is_dir() and (Path(ctx.sandbox_path) / "notes.txt").exists()
    assert isinstance(ctx.created_at, datetime.datetime)
    assert len(sb.sandbox_id) == 26  # a ULID
    assert sb.strategy == "copy_on_write"
    # lazy: the same sandbox (the same object) for the same (plan, resource)
    assert manager.get_or_create_sandbox("p", "docs", project, "copy_on_write") is sb
    assert manager.get_sandbox("p", "docs") is sb
    assert manager.get_sandbox("p", "other") is None
    assert manager.list_sandboxes("p") == [sb]
    assert manager.list_plans() == ["p"]


def test_sandbox_read_write_and_commit_with_message(manager, project):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    sb.write("a/b.txt", b"bytes\x00here")
    assert sb.read("a/b.txt") == b"bytes\x00here"
    assert sb.read("missing.txt") is None
    sb.check_commit()
    r = sb.commit("Apply edits from plan p")
    assert r.success and r.added_files == ["a/b.txt"]
    assert (project / "a" / "b.txt").read_bytes() == b"bytes\x00here"


def test_rollback_of_an_active_sandbox_discards_its_changes(manager, project):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    Path(sb.get_path("notes.txt")).write_text("scratch\n")
    sb.rollback()
    assert sb.status == SandboxStatus.ROLLED_BACK
    assert Path(sb.get_path("notes.txt")).read_text() == "one\n"  # re-used: active again
    assert sb.status == SandboxStatus.ACTIVE
    assert len(sb.diff()) == 0


def test_rollback_all_and_cleanup_all(manager, project, tmp_path):
    other = tmp_path / "other"
    write(other / "x.txt", "x\n")
    a = manager.get_or_create_sandbox("p", "a", project, "copy_on_write")
    b = manager.get_or_create_sandbox("p", "b", other, "copy_on_write")
    Path(a.get_path("notes.txt")).write_text("A\n")
    Path(b.get_path("x.txt")).write_text("B\n")
    manager.rollback_all("p")
    assert a.status == b.status == SandboxStatus.ROLLED_BACK
    assert (project / "notes.txt").read_text() == "one\n" and (other / "x.txt").read_text() == "x\n"
    sandbox_dir = Path(a.context.sandbox_path)  # type: ignore[union-attr]
    manager.cleanup_all("p")
    assert not sandbox_dir.exists()
    assert manager.list_sandboxes("p") == [] and manager.get_sandbox("p", "a") is None
    a.cleanup()  # idempotent


def test_cleanup_abandoned_counts_finished_sandboxes(manager, project, tmp_path):
    other = tmp_path / "other"
    write(other / "x.txt", "x\n")
    done = manager.get_or_create_sandbox("p", "done", project, "copy_on_write")
    Path(done.get_path("notes.txt")).write_text("two\n")
    manager.commit_all("p")
    live = manager.get_or_create_sandbox("q", "live", other, "copy_on_write")
    Path(live.get_path("x.txt")).write_text("work\n")
    assert manager.cleanup_abandoned() == 1
    assert done.status == SandboxStatus.CLEANED_UP
    assert live.status == SandboxStatus.ACTIVE
    assert (project / "notes.txt").read_text() == "two\n"


def test_none_strategy_writes_through(manager, project):
    sb = manager.get_or_create_sandbox("p", "api", project, "none")
    Path(sb.get_path("notes.txt")).write_text("direct\n")
    assert (project / "notes.txt").read_text() == "direct\n"
    assert not sb.is_rollbackable
    assert not SandboxStrategy.NONE.is_rollbackable and SandboxStrategy.GIT_WORKTREE.is_rollbackable


def test_overlay_strategy_isolates_and_commits(manager, project):
    sb = manager.get_or_create_sandbox("p", "ov", project, "overlay")
    Path(sb.get_path("notes.txt")).write_text("overlaid\n")
    assert (project / "notes.txt").read_text() == "one\n"
    assert [r.success for r in manager.commit_all("p")] == [True]
    assert (project / "notes.txt").read_text() == "overlaid\n"
    manager.cleanup_all("p")


def test_prepared_snapshot_is_the_lower_of_later_overlay_sandboxes(manager, project):
    info = manager.prepare_snapshot(project)
    assert isinstance(info, patchbox.SnapshotInfo)
    assert info.original == str(project.resolve()) and info.files >= 1
    assert isinstance(info.created_at, datetime.datetime)
    assert Path(info.path, "notes.txt").read_text() == "one\n"
    assert [s.id for s in manager.snapshots()] == [info.id]
    # Edits to the original after the snapshot are not in the sandbox's view ...
    (project / "notes.txt").write_text("changed after the snapshot\n")
    sb = manager.get_or_create_sandbox("p", "ov", project, "overlay")
    ctx = sb.context
    assert ctx is not None and ctx.metadata["overlay.lower"] == info.id
    assert Path(sb.get_path("notes.txt")).read_text() == "one\n"
    # ... and a snapshot in use is kept; once unused, it goes.
    assert manager.drop_snapshots(project) == 0
    manager.cleanup_all("p")
    assert manager.drop_snapshots(project) == 1
    assert manager.snapshots() == []
    with pytest.raises(patchbox.SandboxError):
        manager.prepare_snapshot(project / "notes.txt")


def test_errors_name_the_path(manager, project, tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(patchbox.SandboxCreationError) as e:
        manager.get_or_create_sandbox("p", "r", missing, "copy_on_write")
    assert str(missing) in str(e.value) and e.value.resource_id == "r"
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    with pytest.raises(patchbox.SandboxError):
        sb.get_path("../escape.txt")
    with pytest.raises(patchbox.SandboxError):
        sb.get_path("/etc/passwd")
    with pytest.raises(patchbox.SandboxError, match="unknown|registered"):
        manager.get_or_create_sandbox("p", "x", project, "no_such_strategy")
    with pytest.raises(TypeError):
        manager.get_or_create_sandbox("p", "x", project, 42)
    with pytest.raises(patchbox.SandboxError):
        manager.get_or_create_sandbox("bad/plan", "x", project, "copy_on_write")


def test_commit_in_wrong_state_raises_state_error(manager, project):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    sb.cleanup()
    with pytest.raises(patchbox.SandboxStateError) as e:
        sb.commit()
    assert e.value.from_status == "cleaned_up" and e.value.to_status == "committed"
    assert e.value.sandbox_id == sb.sandbox_id


def test_conflict_refuses_the_whole_plan_before_writing(manager, project, tmp_path):
    other = tmp_path / "other"
    write(other / "x.txt", "x\n")
    a = manager.get_or_create_sandbox("p", "a", other, "copy_on_write")
    b = manager.get_or_create_sandbox("p", "b", project, "copy_on_write")
    Path(a.get_path("x.txt")).write_text("A\n")
    Path(b.get_path("notes.txt")).write_text("sandbox\n")
    (project / "notes.txt").write_text("user edit\n")  # the user changed the same line
    [failed] = manager.commit_all("p")  # a sandbox-level failure: the one failed result
    assert not failed.success and failed.sandbox_id == b.sandbox_id
    assert failed.metadata["rolled_back_ids"] == [] and "notes.txt" in (failed.error or "")
    assert (other / "x.txt").read_text() == "x\n"  # nothing written
    assert (project / "notes.txt").read_text() == "user edit\n"


def test_boundaries_share_one_sandbox(manager, project):
    reg = patchbox.ResourceRegistry()
    reg.add(patchbox.Resource("proj", "directory", project))
    src = patchbox.Resource("src", "directory", project / "src", parent="proj")
    notes = patchbox.Resource("notes", "file", project / "notes.txt", parent="proj")
    reg.add(src)
    reg.add(notes)
    assert manager.resolve_sandbox_key(src, reg) == "proj"
    a = manager.get_or_create_sandbox_for_resource("p", src, reg)
    b = manager.get_or_create_sandbox_for_resource("p", notes, reg)
    assert a is b
    assert manager.resource_prefix("p", src, reg) == "src"
    Path(a.get_path("src/main.py")).write_text("print('sandboxed')\n")
    assert (project / "src" / "main.py").read_text() == "print('hi')\n"
    manager.clear_boundary_cache()
    assert manager.resolve_sandbox_key(notes, reg) == "proj"
    with pytest.raises(patchbox.SandboxError):
        reg.add(patchbox.Resource("orphan", "file", project / "x", parent="nope"))


def test_sandbox_context_manager_keeps_uncommitted_work(manager, project):
    with manager.get_or_create_sandbox("p", "docs", project, "copy_on_write") as sb:
        Path(sb.get_path("notes.txt")).write_text("unsaved\n")
    assert sb.status == SandboxStatus.ACTIVE  # uncommitted work is never dropped silently
    assert Path(sb.get_path("notes.txt")).read_text() == "unsaved\n"
    with sb:
        manager.commit_all("p")
    assert sb.status == SandboxStatus.CLEANED_UP  # committed: exit cleaned it up
    assert (project / "notes.txt").read_text() == "unsaved\n"


def test_sandbox_context_manager_cleans_up_an_unused_sandbox_on_error(manager, project):
    with pytest.raises(RuntimeError):
        with manager.get_or_create_sandbox("p", "docs", project, "copy_on_write") as sb:
            raise RuntimeError("the actor failed")
    assert sb.status == SandboxStatus.CLEANED_UP


def test_manager_reopened_over_the_root_finds_active_work(root, project):
    with SandboxManager(root) as m:
        sb = m.get_or_create_sandbox("p", "docs", project, "copy_on_write")
        Path(sb.get_path("notes.txt")).write_text("kept\n")
        quiet = m.get_or_create_sandbox("p", "quiet", project, "copy_on_write")
        sb_id, quiet_dir = sb.sandbox_id, Path(quiet.context.sandbox_path)  # type: ignore[union-attr]
    assert not quiet_dir.exists()  # closing cleaned up the sandbox without work
    with pytest.raises(patchbox.SandboxError, match="closed"):
        m.list_sandboxes("p")
    with SandboxManager(root) as again:
        found = again.get_sandbox("p", "docs")
        assert found is not None and found.sandbox_id == sb_id
        assert again.get_sandbox("p", "quiet") is None
        assert found.read("notes.txt") == b"kept\n"
        again.commit_all("p")
        again.cleanup_all("p")
    assert (project / "notes.txt").read_text() == "kept\n"


def test_default_root_is_patchbox_root(root, project):
    with SandboxManager() as m:
        assert Path(m.root) == root.resolve()


def test_threads_share_a_manager(manager, project, tmp_path):
    dirs = []
    for i in range(4):
        d = tmp_path / f"res{i}"
        write(d / "f.txt", "0\n")
        dirs.append(d)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            sb = manager.get_or_create_sandbox("p", f"r{i}", dirs[i], "copy_on_write")
            Path(sb.get_path("f.txt")).write_text(f"{i}\n")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(manager.commit_all("p")) == 4
    assert [(d / "f.txt").read_text() for d in dirs] == ["0\n", "1\n", "2\n", "3\n"]


def test_create_is_done_once_and_recovery_reports_nothing_on_a_fresh_root(manager, project):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    with pytest.raises(patchbox.SandboxStateError) as e:
        sb.create("p")  # get_or_create_sandbox created it already
    assert (e.value.from_status, e.value.to_status) == ("created", "created")
    with pytest.raises(patchbox.SandboxError, match="invalid plan id"):
        sb.create("a/b")  # the plan id is parsed before the sandbox is asked
    assert manager.recovery() == ([], [])
    modes = {d.path: (d.before_mode, d.after_mode) for d in sb.diff().entries}
    assert modes == {}
    Path(sb.get_path("run.sh")).write_text("#!/bin/sh\n")
    os.chmod(sb.get_path("run.sh"), 0o755)
    [entry] = sb.diff().entries
    assert (entry.path, entry.operation, entry.before_mode, entry.after_mode) == ("run.sh", "added", None, 0o100755)
