"""The plan executors' sandbox-module page, statement by statement: each test names the
statement it checks and asserts what a user coding against the page sees. Module paths are
patchbox's (``cleveragents.infrastructure.sandbox.X`` → ``patchbox.plan.X``); everything else
is as the page writes it. Default roots land under tmp_path (fixture ``root``)."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import stat
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import List, Optional

import pytest

from _plan_fixtures import git, project, repo, root, write  # noqa: F401

PLAN = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    p = tmp_path / "app.db"
    c = sqlite3.connect(p)
    c.executescript("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a');")
    c.close()
    return p


def rows(p: Path) -> List[tuple]:
    c = sqlite3.connect(p)
    try:
        return c.execute("SELECT id, v FROM t ORDER BY id").fetchall()
    finally:
        c.close()


# ------------------------------------------------------------------ Sandbox Strategies


@pytest.mark.parametrize(
    "strategy, cls_name",
    [
        ("git_worktree", "GitWorktreeSandbox"),
        ("copy_on_write", "CopyOnWriteSandbox"),
        ("overlay", "OverlaySandbox"),
        ("transaction_rollback", "TransactionSandbox"),
        ("none", "NoSandbox"),
    ],
)
def test_each_strategy_has_its_class(root, repo, db, tmp_path, strategy, cls_name):
    """"The strategy is selected per-resource via the sandbox_strategy field ... The
    SandboxFactory instantiates the correct class." """
    import patchbox.plan as plan
    from patchbox.plan.manager import SandboxManager
    from patchbox.plan.protocol import Sandbox

    original = {"git_worktree": repo, "transaction_rollback": db}.get(strategy, tmp_path / "dir")
    if strategy in ("copy_on_write", "overlay", "none"):
        write(original / "a.txt", "a\n")
    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "res-001", str(original), strategy)
        cls = getattr(plan, cls_name)
        assert isinstance(sb, cls) and type(sb).__name__ == cls_name
        assert isinstance(sb, Sandbox)
        others = {"GitWorktreeSandbox", "CopyOnWriteSandbox", "OverlaySandbox", "TransactionSandbox", "NoSandbox"} - {cls_name}
        assert not any(isinstance(sb, getattr(plan, o)) for o in others)
        assert manager.get_sandbox(PLAN, "res-001") is sb
        from patchbox.plan.factory import SandboxFactory

        assert SandboxFactory().get_strategy_class(strategy) is cls
        manager.cleanup_all(PLAN)


# ------------------------------------------------------------------ Lifecycle


@pytest.mark.parametrize(
    "a, b",
    [
        ("PENDING", "CREATED"),
        ("CREATED", "ACTIVE"),
        ("ACTIVE", "COMMITTED"),
        ("COMMITTED", "CLEANED_UP"),
        ("ACTIVE", "ROLLED_BACK"),
        ("ROLLED_BACK", "ACTIVE"),
        ("ROLLED_BACK", "CLEANED_UP"),
        ("CREATED", "ERRORED"),
        ("ERRORED", "CLEANED_UP"),
    ],
)
def test_lifecycle_arrows_are_valid(a, b):
    """Each arrow of the lifecycle diagram is a valid transition."""
    from patchbox.plan.protocol import SandboxStatus

    assert SandboxStatus.can_transition(getattr(SandboxStatus, a), getattr(SandboxStatus, b))


def test_cleaned_up_is_terminal():
    """"CLEANED_UP — All artefacts removed; terminal state." """
    from patchbox.plan.protocol import SandboxStatus

    assert not any(SandboxStatus.can_transition(SandboxStatus.CLEANED_UP, s) for s in SandboxStatus.members() if s != SandboxStatus.CLEANED_UP)


def test_statuses_mean_what_the_table_says(root, project):
    """CREATED: exists, not yet activated; ACTIVE: writes routed here; COMMITTED: applied to
    the original; ROLLED_BACK: discarded, may be re-activated; CLEANED_UP: artefacts gone."""
    from patchbox.plan import SandboxManager, SandboxStatus

    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "res-001", project, "copy_on_write")
        assert sb.status == SandboxStatus.CREATED
        assert sb.context is not None and Path(sb.context.sandbox_path).is_dir()
        Path(sb.get_path("notes.txt")).write_text("routed\n")
        assert sb.status == SandboxStatus.ACTIVE
        assert (project / "notes.txt").read_text() == "one\n"
        sb.rollback()
        assert sb.status == SandboxStatus.ROLLED_BACK
        Path(sb.get_path("notes.txt")).write_text("re-used\n")  # ROLLED_BACK -> ACTIVE (re-use)
        assert sb.status == SandboxStatus.ACTIVE
        assert sb.commit().success and sb.status == SandboxStatus.COMMITTED
        assert (project / "notes.txt").read_text() == "re-used\n"
        sandbox_path = sb.context.sandbox_path
        sb.cleanup()
        assert sb.status == SandboxStatus.CLEANED_UP and not Path(sandbox_path).exists()


# ------------------------------------------------------------------ Sandbox (Protocol)


class MySandbox:
    """A user's own implementation of the documented members."""

    def __init__(self) -> None:
        from patchbox.plan.protocol import SandboxStatus

        self.sandbox_id = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
        self.status = SandboxStatus.PENDING
        self.context = None

    def create(self, plan_id: str):  # -> SandboxContext
        raise NotImplementedError

    def get_path(self, resource_path: str) -> str:
        return "/tmp/" + resource_path

    def commit(self, message: Optional[str] = None):  # -> CommitResult
        raise NotImplementedError

    def rollback(self) -> None:
        pass

    def cleanup(self) -> None:
        pass


def test_sandbox_protocol_is_runtime_checkable_for_a_users_class():
    """"Runtime-checkable protocol that all sandbox implementations satisfy." and the Testing
    section's ``assert isinstance(my_sandbox, Sandbox)``."""
    from patchbox.plan.protocol import Sandbox

    my_sandbox = MySandbox()
    assert isinstance(my_sandbox, Sandbox)

    class NoCommit(MySandbox):
        commit = None  # type: ignore[assignment]

    class Missing:
        sandbox_id = "x"

    assert not isinstance(NoCommit(), Sandbox)
    assert not isinstance(Missing(), Sandbox)


def test_typical_usage_with_the_documented_imports(root, repo):
    """The "Typical usage in plan execution" snippet, through ``patchbox.plan.protocol``."""
    from patchbox.plan.manager import SandboxManager
    from patchbox.plan.protocol import CommitResult, Sandbox

    manager = SandboxManager()
    sandbox = manager.get_or_create_sandbox(
        plan_id="01ARZ3NDEKTSV4RRFFQ69G5FAV",
        resource_id="res-001",
        original_path=str(repo),
        sandbox_strategy="git_worktree",
    )
    assert isinstance(sandbox, Sandbox)
    sandboxed_path = sandbox.get_path("src/main.py")
    assert os.path.isabs(sandboxed_path) and sandboxed_path.startswith(sandbox.context.sandbox_path)
    Path(sandboxed_path).write_text("print(2)\n")
    result = sandbox.commit("Apply edits from plan 01ARZ3...")
    assert isinstance(result, CommitResult)
    assert (result.success, result.changed_files, result.added_files, result.deleted_files) == (True, ["src/main.py"], [], [])
    sandbox.rollback()
    sandbox.cleanup()
    sandbox.cleanup()  # idempotent
    manager.close()


def test_key_properties(root, project):
    """sandbox_id: unique ULID; status: SandboxStatus; context: SandboxContext after create()."""
    from patchbox.plan import SandboxContext, SandboxManager, SandboxStatus

    with SandboxManager() as manager:
        a = manager.get_or_create_sandbox(PLAN, "a", project, "copy_on_write")
        b = manager.get_or_create_sandbox(PLAN, "b", project, "copy_on_write")
        assert len(a.sandbox_id) == 26 and a.sandbox_id != b.sandbox_id
        assert isinstance(a.status, SandboxStatus)
        assert isinstance(a.context, SandboxContext)
        manager.cleanup_all(PLAN)


# ------------------------------------------------------------------ SandboxManager


def test_manager_methods(root, project, tmp_path):
    """get_sandbox (None when absent), list_sandboxes, rollback_all, cleanup_all (removes
    tracking), cleanup_abandoned (returns the count)."""
    from patchbox.plan.manager import SandboxManager
    from patchbox.plan.protocol import SandboxStatus

    other = tmp_path / "other"
    write(other / "x.txt", "x\n")
    with SandboxManager() as manager:
        assert manager.get_sandbox(PLAN, "res-001") is None
        a = manager.get_or_create_sandbox(PLAN, "res-001", project, "copy_on_write")
        b = manager.get_or_create_sandbox(PLAN, "res-002", other, "copy_on_write")
        assert manager.get_or_create_sandbox(PLAN, "res-001", project, "copy_on_write") is a  # lazy
        assert manager.list_sandboxes(PLAN) == [a, b]
        Path(a.get_path("notes.txt")).write_text("changed\n")
        manager.rollback_all(PLAN)
        assert a.status == SandboxStatus.ROLLED_BACK
        assert manager.cleanup_abandoned() == 1  # the rolled-back one; b is still created
        manager.cleanup_all(PLAN)
        assert manager.get_sandbox(PLAN, "res-002") is None and manager.list_sandboxes(PLAN) == []


# ------------------------------------------------------------------ SandboxContext, CommitResult


def test_sandbox_context_is_a_frozen_dataclass(root, project):
    """"Immutable frozen dataclass describing an initialised sandbox." with the listed
    attributes and types."""
    from patchbox.plan.protocol import SandboxContext

    from patchbox.plan import SandboxManager

    with SandboxManager() as manager:
        ctx = manager.get_or_create_sandbox(PLAN, "res-001", project, "copy_on_write").context
        assert dataclasses.is_dataclass(ctx) and isinstance(ctx, SandboxContext)
        fields = [f.name for f in dataclasses.fields(ctx)]
        assert fields == ["sandbox_id", "sandbox_path", "original_path", "resource_id", "plan_id", "created_at", "metadata"]
        d = dataclasses.asdict(ctx)
        assert d["plan_id"] == PLAN and d["resource_id"] == "res-001"
        assert isinstance(ctx.created_at, datetime) and isinstance(ctx.metadata, dict)
        assert Path(ctx.original_path).resolve() == project.resolve()
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctx.plan_id = "other"  # type: ignore[misc]
        assert dataclasses.replace(ctx, plan_id="other").plan_id == "other"
        manager.cleanup_all(PLAN)


def test_commit_result_is_a_frozen_dataclass(root, project):
    """"Immutable frozen dataclass describing the outcome of a commit() call." """
    from patchbox.plan import SandboxManager
    from patchbox.plan.protocol import CommitResult

    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "res-001", project, "copy_on_write")
        Path(sb.get_path("notes.txt")).write_text("two\n")
        Path(sb.get_path("new.txt")).write_text("new\n")
        os.remove(sb.get_path("old.txt"))
        r = sb.commit()
        assert dataclasses.is_dataclass(r) and isinstance(r, CommitResult)
        assert [f.name for f in dataclasses.fields(r)] == [
            "sandbox_id", "success", "commit_ref", "changed_files", "added_files", "deleted_files", "error", "timestamp", "metadata",
        ]
        assert dataclasses.asdict(r)["changed_files"] == ["notes.txt"]
        assert (r.sandbox_id, r.success, r.added_files, r.deleted_files, r.error) == (sb.sandbox_id, True, ["new.txt"], ["old.txt"], None)
        assert isinstance(r.timestamp, datetime) and isinstance(r.metadata, dict)
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.success = False  # type: ignore[misc]
        manager.cleanup_all(PLAN)


# ------------------------------------------------------------------ Atomic Commit (commit_all)


class Recorder:
    """A custom strategy over a dict, recording the order of commits and rollbacks; its
    commit of the resource named ``fail_on`` raises ``exc``."""

    log: List[str] = []
    fail_on: Optional[str] = None
    exc: Optional[BaseException] = None

    def create(self, plan_id, resource):
        from patchbox.plan.sandbox_strategy import SandboxRef

        self.data: dict = {}
        self.rid = resource.resource_id
        return SandboxRef(resource.resource_id, plan_id, resource.resource_id)

    def read(self, ref, path):
        return self.data.get(path)

    def write(self, ref, path, content):
        self.data[path] = content

    def diff(self, ref):
        from patchbox.plan.sandbox_strategy import DiffEntry, DiffView

        return DiffView(ref.sandbox_id, [DiffEntry(p, "added", None, c) for p, c in self.data.items()])

    def commit(self, ref):
        if self.rid == Recorder.fail_on and Recorder.exc is not None:
            raise Recorder.exc
        Recorder.log.append(f"commit {self.rid}")

    def rollback(self, ref, after_commit=False):
        Recorder.log.append(f"rollback {self.rid}" + (" after commit" if after_commit else ""))

    def checkpoint(self, ref, checkpoint_id):
        pass

    def restore_checkpoint(self, ref, checkpoint_id):
        pass

    def cleanup(self, ref):
        pass


@pytest.fixture
def recorder_manager(root):
    from patchbox.plan.manager import SandboxManager
    from patchbox.plan.strategy_registry import SandboxStrategyRegistry

    Recorder.log, Recorder.fail_on, Recorder.exc = [], None, None
    registry = SandboxStrategyRegistry()
    registry.register_class("recorder", Recorder)
    with SandboxManager(custom_registry=registry) as manager:
        yield manager


def three(manager, tmp_path) -> list:
    out = []
    for rid in ("r1", "r2", "r3"):
        sb = manager.get_or_create_sandbox(PLAN, rid, tmp_path, "recorder")
        sb.write("f.txt", rid.encode())
        out.append(sb)
    return out


def test_commit_all_returns_all_successes(recorder_manager, tmp_path):
    """Step 5: "Return a list of CommitResult objects (all success=True) on success"."""
    sbs = three(recorder_manager, tmp_path)
    results = recorder_manager.commit_all(PLAN)
    assert [r.sandbox_id for r in results] == [s.sandbox_id for s in sbs]
    assert all(r.success for r in results)
    assert Recorder.log == ["commit r1", "commit r2", "commit r3"]


def test_commit_all_collects_only_created_or_active(recorder_manager, tmp_path):
    """Step 1: "Collect all sandboxes in CREATED or ACTIVE status for the plan." """
    a, b, c = three(recorder_manager, tmp_path)
    b.rollback()  # ROLLED_BACK: not collected
    results = recorder_manager.commit_all(PLAN)
    assert [r.sandbox_id for r in results] == [a.sandbox_id, c.sandbox_id]


def test_commit_all_sandbox_error_rolls_back_lifo_and_returns_the_failed_result(recorder_manager, tmp_path):
    """Steps 4 and 5 and the SandboxError row: "If any commit fails, roll back all
    previously-committed sandboxes in LIFO order" and "a single CommitResult(success=False)
    on failure" for a sandbox-level commit failure."""
    from patchbox.plan.protocol import AtomicCommitError, SandboxCommitError, SandboxStatus

    a, b, c = three(recorder_manager, tmp_path)
    Recorder.fail_on, Recorder.exc = "r3", SandboxCommitError("quota exceeded")
    try:
        results = recorder_manager.commit_all(PLAN)
    except AtomicCommitError:  # pragma: no cover - what the page says does not happen
        pytest.fail("a SandboxError must not raise AtomicCommitError")
    assert len(results) == 1 and not results[0].success
    assert results[0].sandbox_id == c.sandbox_id and "quota exceeded" in (results[0].error or "")
    assert Recorder.log == ["commit r1", "commit r2", "rollback r2 after commit", "rollback r1 after commit"]
    assert results[0].metadata["rolled_back_ids"] == [b.sandbox_id, a.sandbox_id]
    assert {s.status for s in (a, b, c)} == {SandboxStatus.ACTIVE}


def test_commit_all_other_exception_raises_atomic_commit_error(recorder_manager, tmp_path):
    """The AtomicCommitError row: "A non-sandbox exception during commit; rollback attempted;
    exception raised with rolled_back_ids and failed_rollback_ids attributes"."""
    from patchbox.plan.protocol import AtomicCommitError

    a, b, c = three(recorder_manager, tmp_path)
    Recorder.fail_on, Recorder.exc = "r2", RuntimeError("bug in the strategy")
    with pytest.raises(AtomicCommitError) as e:
        recorder_manager.commit_all(PLAN)
    assert e.value.rolled_back_ids == [a.sandbox_id]
    assert e.value.failed_rollback_ids == []
    assert "bug in the strategy" in str(e.value)
    assert Recorder.log == ["commit r1", "rollback r1 after commit"]
    # Alone, the same commit is not reported as a sandbox-level error either.
    from patchbox.errors import PatchboxError, SandboxError

    with pytest.raises(PatchboxError) as alone:
        b.commit()
    assert alone.value.kind == "unexpected" and not isinstance(alone.value, SandboxError)


def test_commit_all_commits_rollbackable_first(root, project, db):
    """Steps 2 and 3: rollbackable (git, copy-on-write, overlay) first; non-rollbackable
    (none, transaction) last."""
    from patchbox.plan.manager import SandboxManager

    with SandboxManager() as manager:
        t = manager.get_or_create_sandbox(PLAN, "db", db, "transaction_rollback")
        t.execute("INSERT INTO t VALUES (2, 'b')")
        c = manager.get_or_create_sandbox(PLAN, "files", project, "copy_on_write")
        Path(c.get_path("notes.txt")).write_text("two\n")
        results = manager.commit_all(PLAN)
        assert [r.sandbox_id for r in results] == [c.sandbox_id, t.sandbox_id]
        assert all(r.success for r in results)
        manager.cleanup_all(PLAN)


def test_sqlite_commit_that_cannot_get_its_lock_returns_the_failed_result(root, project, db):
    """A SQLite COMMIT that cannot get its lock is a SandboxError: the committed
    copy-on-write sandbox is rolled back and the one failed result returned."""
    from patchbox.plan.manager import SandboxManager

    with SandboxManager() as manager:
        c = manager.get_or_create_sandbox(PLAN, "files", project, "copy_on_write")
        Path(c.get_path("notes.txt")).write_text("two\n")
        t = manager.get_or_create_sandbox(PLAN, "db", db, "transaction_rollback")
        t.execute("PRAGMA busy_timeout = 0")
        t.execute("INSERT INTO t VALUES (2, 'b')")
        # A reader in another process (SQLite's locks are per process) holds a shared lock
        # the COMMIT must wait for, until told to stop.
        script = (
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN'); c.execute('SELECT count(*) FROM t').fetchall()\n"
            "print('ready', flush=True); sys.stdin.readline(); c.execute('ROLLBACK')\n"
        )
        reader = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert reader.stdout is not None and reader.stdout.readline() == "ready\n"
            results = manager.commit_all(PLAN)
        finally:
            assert reader.stdin is not None
            reader.stdin.write("done\n")
            reader.stdin.close()
            reader.wait()
        assert [(r.sandbox_id, r.success) for r in results] == [(t.sandbox_id, False)]
        assert results[0].metadata["rolled_back_ids"] == [c.sandbox_id]
        assert (project / "notes.txt").read_text() == "one\n"
        assert rows(db) == [(1, "a")]
        # Nothing was lost: the plan commits once the reader is gone.
        assert all(r.success for r in manager.commit_all(PLAN))
        assert rows(db) == [(1, "a"), (2, "b")] and (project / "notes.txt").read_text() == "two\n"
        manager.cleanup_all(PLAN)


def test_the_documented_error_handling_snippet(recorder_manager, tmp_path, capsys):
    """The try/except example: the SandboxError path prints "Commit failed", the other path
    "Atomic commit failed" with both id lists."""
    from patchbox.plan.protocol import AtomicCommitError, SandboxCommitError

    manager = recorder_manager

    def run(plan_id: str) -> None:
        try:
            results = manager.commit_all(plan_id)
            if not all(r.success for r in results):
                # Partial failure (SandboxError path)
                failed = [r for r in results if not r.success]
                print(f"Commit failed: {failed[0].error}")
        except AtomicCommitError as exc:
            # Unexpected exception during commit
            print(f"Atomic commit failed: {exc}")
            print(f"Rolled back: {exc.rolled_back_ids}")
            print(f"Failed rollbacks: {exc.failed_rollback_ids}")

    a, _, _ = three(manager, tmp_path)
    Recorder.fail_on, Recorder.exc = "r2", SandboxCommitError("conflict")
    run(PLAN)
    out = capsys.readouterr().out
    assert out.startswith("Commit failed:") and "conflict" in out
    Recorder.exc = KeyError("boom")
    run(PLAN)
    out = capsys.readouterr().out
    assert "Atomic commit failed:" in out and f"Rolled back: ['{a.sandbox_id}']" in out
    assert "Failed rollbacks: []" in out


# ------------------------------------------------------------------ Sandbox Implementations


def test_git_worktree_commit_lands_on_the_original_branch(root, repo):
    """GitWorktreeSandbox: "Changes are committed to the worktree branch and then merged (or
    cherry-picked) back to the original branch on commit()"."""
    from patchbox.plan import GitWorktreeSandbox, SandboxManager

    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "repo", repo, "git_worktree")
        assert isinstance(sb, GitWorktreeSandbox)
        assert git(repo, "worktree", "list").count("\n") == 2
        Path(sb.get_path("README.md")).write_text("edited\n")
        r = sb.commit("edit")
        assert git(repo, "rev-parse", "HEAD").strip() == r.commit_ref
        assert git(repo, "show", "HEAD:README.md") == "edited\n"
        sb.rollback()  # rollback from COMMITTED
        assert (repo / "README.md").read_text() == "hello\n"
        manager.cleanup_all(PLAN)


def test_copy_on_write_is_a_full_copy_restored_after_commit(root, project):
    """CopyOnWriteSandbox: "Creates a full directory copy of the resource"; "Rollback from
    COMMITTED: restore from pre-commit backup"."""
    from patchbox.plan import CopyOnWriteSandbox, SandboxManager

    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "files", project, "copy_on_write")
        assert isinstance(sb, CopyOnWriteSandbox)
        root_dir = Path(sb.get_path(""))
        assert sorted(p.relative_to(root_dir).as_posix() for p in root_dir.rglob("*") if p.is_file()) == ["notes.txt", "old.txt", "src/main.py"]
        Path(sb.get_path("notes.txt")).write_text("two\n")
        sb.commit()
        assert (project / "notes.txt").read_text() == "two\n"
        sb.rollback()
        assert (project / "notes.txt").read_text() == "one\n"
        manager.cleanup_all(PLAN)


def test_overlay_works_with_or_without_overlayfs(root, project):
    """OverlaySandbox: "Falls back to copy-on-write when OverlayFS is unavailable": either
    way writes stay in the sandbox until commit."""
    from patchbox.plan import OverlaySandbox, SandboxManager

    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "files", project, "overlay")
        assert isinstance(sb, OverlaySandbox)
        Path(sb.get_path("notes.txt")).write_text("two\n")
        assert (project / "notes.txt").read_text() == "one\n"
        assert sb.commit().success and (project / "notes.txt").read_text() == "two\n"
        sb.rollback()
        assert (project / "notes.txt").read_text() == "one\n"
        manager.cleanup_all(PLAN)


def test_transaction_commit_is_commit_and_rollback_is_rollback(root, db):
    """TransactionSandbox: "commit() issues COMMIT; rollback() issues ROLLBACK." """
    from patchbox.plan import SandboxManager, TransactionSandbox

    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "db", db, "transaction_rollback")
        assert isinstance(sb, TransactionSandbox)
        sb.execute("INSERT INTO t VALUES (2, 'b')")
        assert rows(db) == [(1, "a")]
        sb.rollback()
        assert rows(db) == [(1, "a")]
        sb.execute("INSERT INTO t VALUES (3, 'c')")
        assert sb.commit().success and rows(db) == [(1, "a"), (3, "c")]
        manager.cleanup_all(PLAN)


def test_no_sandbox_writes_are_immediate_and_cannot_be_rolled_back(root, tmp_path):
    """NoSandbox: "Pass-through — writes go directly to the original resource ... Cannot be
    rolled back." """
    from patchbox.plan import NoSandbox, SandboxManager
    from patchbox.plan.protocol import SandboxRollbackError

    d = tmp_path / "api"
    write(d / "state.txt", "one\n")
    with SandboxManager() as manager:
        sb = manager.get_or_create_sandbox(PLAN, "api", d, "none")
        assert isinstance(sb, NoSandbox) and not sb.is_rollbackable
        Path(sb.get_path("state.txt")).write_text("two\n")
        assert (d / "state.txt").read_text() == "two\n"
        with pytest.raises(SandboxRollbackError):
            sb.rollback()
        manager.cleanup_all(PLAN)


# ------------------------------------------------------------------ Filesystem Utilities


def test_backup_directory_preserves_permissions_timestamps_and_symlinks(tmp_path):
    """backup_directory(src, dst): "Copy a directory tree preserving permissions,
    timestamps, and symlinks"."""
    from patchbox.plan._fs_utils import backup_directory

    src = tmp_path / "src"
    write(src / "run.sh", "#!/bin/sh\n")
    os.chmod(src / "run.sh", 0o750)
    os.utime(src / "run.sh", (1_000_000_000, 1_000_000_000))
    os.symlink("run.sh", src / "link")
    dst = tmp_path / "dst"
    backup_directory(src, dst)
    assert stat.S_IMODE(os.stat(dst / "run.sh").st_mode) == 0o750
    assert os.stat(dst / "run.sh").st_mtime == 1_000_000_000
    assert os.path.islink(dst / "link") and os.readlink(dst / "link") == "run.sh"


def test_safe_restore_puts_the_backup_in_place(tmp_path):
    """safe_restore(backup, original): "Rename-based atomic restore (backup → original)"."""
    from patchbox.plan._fs_utils import backup_directory, safe_restore

    original = tmp_path / "work"
    write(original / "a.txt", "a\n")
    backup = backup_directory(original, tmp_path / "backup")
    (original / "a.txt").write_text("broken\n")
    write(original / "junk.txt", "junk\n")
    inode = os.stat(backup / "a.txt").st_ino
    safe_restore(backup, original)
    assert sorted(p.name for p in original.iterdir()) == ["a.txt"]
    assert (original / "a.txt").read_text() == "a\n"
    assert os.stat(original / "a.txt").st_ino == inode  # renamed, not copied
    assert not backup.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_compute_diff_is_a_unified_diff_patch_applies(tmp_path):
    """compute_diff(original, modified): "Compute a unified diff between two directory
    trees" — GNU patch turns a copy of the original into the modified tree with it."""
    from patchbox.plan._fs_utils import backup_directory, compute_diff

    original, modified = tmp_path / "a", tmp_path / "b"
    write(original / "keep.txt", "same\n")
    write(original / "edit.txt", "one\ntwo\nthree\n")
    write(original / "gone.txt", "bye\n")
    write(original / "noeol.txt", "x")
    backup_directory(original, modified)
    (modified / "edit.txt").write_text("one\n2\nthree\n")
    (modified / "gone.txt").unlink()
    write(modified / "sub" / "new.txt", "hello\n")
    (modified / "noeol.txt").write_text("y")
    diff = compute_diff(original, modified)
    assert "--- a/edit.txt\n+++ b/edit.txt\n" in diff and "keep.txt" not in diff
    assert compute_diff(original, original) == ""
    target = backup_directory(original, tmp_path / "target")
    subprocess.run(["patch", "-p1", "-s", "-E"], input=diff.encode(), cwd=target, check=True)
    assert compute_diff(target, modified) == ""
    by_git = backup_directory(original, tmp_path / "by-git")
    # Outside any repository (a repository above tmp_path would make paths relative to it).
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tmp_path))
    subprocess.run(["git", "apply", "-p1", "-"], input=diff.encode(), cwd=by_git, check=True, env=env)
    assert compute_diff(by_git, modified) == ""
