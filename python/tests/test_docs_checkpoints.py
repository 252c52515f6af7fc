"""The plan executors' checkpoint page, statement by statement: the SandboxCheckpoint model,
the CheckpointManager API, the checkpoint lifecycle, the hooks of PlanExecutor and
PlanApplyService, thread safety and snapshot storage. Each test names the statement it
checks. The system temp folder is pointed into tmp_path (``TMPDIR``), so what the manager
leaves there is seen."""

from __future__ import annotations

import json
import os
import stat
import threading
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List

import pytest

from _plan_fixtures import project, root, write  # noqa: F401

PLAN = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temp folder, for the library: ``TMPDIR`` under tmp_path."""
    t = tmp_path / "systemp"
    t.mkdir()
    monkeypatch.setenv("TMPDIR", str(t))
    return t


@pytest.fixture
def manager(root):
    from patchbox.plan import SandboxManager

    with SandboxManager() as m:
        yield m


@pytest.fixture
def sandbox(manager, project):
    sb = manager.get_or_create_sandbox(PLAN, "docs", project, "copy_on_write")
    Path(sb.get_path("notes.txt")).write_text("one\n")
    return sb


def entries(d: Path) -> List[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


# ------------------------------------------------------------------ SandboxCheckpoint Model


def test_checkpoint_fields_and_types(tmpdir_env, sandbox):
    """The field table: checkpoint_id (ULID), sandbox_id, plan_id, phase, created_at
    (datetime), metadata (dict[str, str]), snapshot_path (str)."""
    from patchbox.plan.checkpoint import CheckpointManager, SandboxCheckpoint

    with CheckpointManager() as mgr:
        cp = mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {"reason": "start"})
        assert isinstance(cp, SandboxCheckpoint)
        assert len(cp.checkpoint_id) == 26
        assert (cp.sandbox_id, cp.plan_id, cp.phase) == (sandbox.sandbox_id, PLAN, "pre_execute")
        assert isinstance(cp.created_at, datetime)
        assert cp.metadata == {"reason": "start"}
        assert isinstance(cp.snapshot_path, str) and Path(cp.snapshot_path).exists()


def test_checkpoint_is_a_frozen_model(tmpdir_env, sandbox):
    """"A frozen Pydantic model": a ``pydantic.BaseModel`` whose ``model_config`` is frozen;
    assigning a field raises Pydantic's ``ValidationError``."""
    import pydantic

    from patchbox.plan.checkpoint import CheckpointManager, SandboxCheckpoint

    assert issubclass(SandboxCheckpoint, pydantic.BaseModel)
    assert SandboxCheckpoint.model_config.get("frozen") is True
    with CheckpointManager() as mgr:
        cp = mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {})
        assert isinstance(cp, pydantic.BaseModel)
        with pytest.raises(pydantic.ValidationError, match="frozen"):
            cp.phase = "post_execute"  # type: ignore[misc]
        assert cp.phase == "pre_execute"
        assert list(SandboxCheckpoint.model_fields) == [
            "checkpoint_id", "sandbox_id", "plan_id", "phase", "created_at", "metadata", "snapshot_path"
        ]


def test_checkpoint_model_dump_and_validate_round_trip(tmpdir_env, sandbox):
    """``model_dump`` / ``model_dump_json`` / ``model_validate`` round-trip, invalid input is
    a ``ValidationError`` (a ``ValueError``), and a validated copy rolls back like the
    original."""
    import pydantic

    from patchbox.plan.checkpoint import CheckpointManager, SandboxCheckpoint

    with CheckpointManager() as mgr:
        cp = mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {"reason": "start"})
        dumped = cp.model_dump()
        assert list(dumped) == ["checkpoint_id", "sandbox_id", "plan_id", "phase", "created_at", "metadata", "snapshot_path"]
        assert dumped["created_at"] == cp.created_at and dumped["metadata"] == {"reason": "start"}
        as_json = json.loads(cp.model_dump_json())
        assert as_json["checkpoint_id"] == cp.checkpoint_id and isinstance(as_json["created_at"], str)
        assert datetime.fromisoformat(as_json["created_at"].replace("Z", "+00:00")) == cp.created_at
        again = SandboxCheckpoint.model_validate(as_json)
        assert again == cp and SandboxCheckpoint.model_validate(dumped) == cp
        assert SandboxCheckpoint.model_validate_json(cp.model_dump_json()) == cp
        assert cp.model_copy(update={"phase": "post_execute"}).phase == "post_execute"
        with pytest.raises(pydantic.ValidationError):
            SandboxCheckpoint.model_validate({"checkpoint_id": "x"})
        with pytest.raises(ValueError):
            SandboxCheckpoint.model_validate({**dumped, "metadata": {"n": 1}})
        with pytest.raises(ValueError):
            SandboxCheckpoint.model_validate({**dumped, "extra_field": "x"})
        Path(sandbox.get_path("notes.txt")).write_text("later\n")
        assert mgr.rollback_to(again)
        assert Path(sandbox.get_path("notes.txt")).read_text() == "one\n"


@pytest.mark.parametrize("protocol", range(2, 6))
def test_checkpoint_pickles_and_rolls_back_after(tmpdir_env, sandbox, protocol):
    """A checkpoint crosses ``pickle`` (a worker process, a queue) unchanged, and the copy
    rolls back like the original."""
    import pickle

    from patchbox.plan.checkpoint import CheckpointManager, SandboxCheckpoint

    with CheckpointManager() as mgr:
        cp = mgr.create_checkpoint(sandbox, PLAN, "post_execute", {"status": "success"})
        back = pickle.loads(pickle.dumps(cp, protocol=protocol))
        assert type(back) is SandboxCheckpoint and back == cp
        assert back.metadata == {"status": "success"} and back.created_at == cp.created_at
        Path(sandbox.get_path("notes.txt")).write_text("later\n")
        assert mgr.rollback_to(back)
        assert Path(sandbox.get_path("notes.txt")).read_text() == "one\n"


def test_checkpoint_nests_in_a_users_pydantic_model(tmpdir_env, sandbox):
    """Being a real Pydantic model, a checkpoint is a field type of a user's own model (a
    plan's record of its checkpoints), serialized and validated with it."""
    from typing import List as _List

    import pydantic

    from patchbox.plan.checkpoint import CheckpointManager, SandboxCheckpoint

    class PlanRecord(pydantic.BaseModel):
        plan_id: str
        checkpoints: _List[SandboxCheckpoint]

    with CheckpointManager() as mgr:
        cp = mgr.create_checkpoint(sandbox, PLAN, "pre_apply", {})
        record = PlanRecord(plan_id=PLAN, checkpoints=[cp])
        back = PlanRecord.model_validate_json(record.model_dump_json())
        assert back.checkpoints == [cp] and isinstance(back.checkpoints[0], SandboxCheckpoint)


# ------------------------------------------------------------------ CheckpointManager API


def test_the_api_snippet_with_a_manager_made_without_arguments(tmpdir_env, sandbox):
    """The API block as written: ``mgr = CheckpointManager()``, create, rollback_to, list,
    delete."""
    from patchbox.plan.checkpoint import CheckpointManager

    plan_id = PLAN
    mgr = CheckpointManager()
    cp = mgr.create_checkpoint(sandbox, plan_id, "pre_execute", {})
    Path(sandbox.get_path("notes.txt")).write_text("executed\n")
    cp2 = mgr.create_checkpoint(sandbox, plan_id, "post_execute", {"status": "success"})
    Path(sandbox.get_path("notes.txt")).write_text("a failed apply\n")
    success = mgr.rollback_to(cp)
    assert success is True and Path(sandbox.get_path("notes.txt")).read_text() == "one\n"
    checkpoints = mgr.list_checkpoints(sandbox.sandbox_id)
    assert [c.checkpoint_id for c in checkpoints] == [cp.checkpoint_id, cp2.checkpoint_id]
    mgr.delete_checkpoint(cp.checkpoint_id)
    assert [c.checkpoint_id for c in mgr.list_checkpoints(sandbox.sandbox_id)] == [cp2.checkpoint_id]
    mgr.close()


def test_a_plan_id_that_is_not_the_sandboxs_is_refused(tmpdir_env, sandbox):
    """``create_checkpoint(sandbox, plan_id, ...)``: the plan_id is the plan owning the
    sandbox; another one is refused with an error naming both, and nothing is recorded."""
    from patchbox.plan.checkpoint import CheckpointManager
    from patchbox.plan.protocol import SandboxError

    with CheckpointManager() as mgr:
        with pytest.raises(SandboxError, match='plan_id "other-plan".*' + PLAN):
            mgr.create_checkpoint(sandbox, "other-plan", "pre_execute", {})
        assert mgr.list_checkpoints(sandbox.sandbox_id) == []


# ------------------------------------------------------------------ Snapshot Storage


def test_snapshots_are_stored_under_the_system_temp_folder(tmpdir_env, sandbox, root):
    """"Snapshots are stored in temporary directories under the system temp folder." """
    from patchbox.plan.checkpoint import CheckpointManager

    with CheckpointManager() as mgr:
        cp = mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {})
        assert Path(cp.snapshot_path).is_relative_to(tmpdir_env)
        assert Path(mgr.storage_dir).parent == tmpdir_env
        assert stat.S_IMODE(os.stat(mgr.storage_dir).st_mode) == 0o700  # private in a shared /tmp
        assert not Path(cp.snapshot_path).is_relative_to(root)


def test_a_full_copy_snapshot_is_made_on_demand(tmpdir_env, sandbox, tmp_path):
    """"Each snapshot is a full copy of the sandbox working directory at the time of checkpoint
    creation": a checkpoint records what changed; ``materialize(cp, dest)`` writes that full
    copy when it is wanted, and the sandbox stays as it is."""
    from patchbox.plan.checkpoint import CheckpointManager

    with CheckpointManager() as mgr:
        cp = mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {})
        Path(sandbox.get_path("notes.txt")).write_text("later\n")
        os.remove(sandbox.get_path("old.txt"))
        dest = tmp_path / "snapshot"
        assert mgr.materialize(cp, dest) is True
        assert (dest / "notes.txt").read_text() == "one\n" and (dest / "old.txt").read_text() == "old\n"
        assert (dest / "src" / "main.py").read_text() == "print('hi')\n"
        assert Path(sandbox.get_path("notes.txt")).read_text() == "later\n"
        assert not Path(sandbox.get_path("old.txt")).exists()


def test_delete_checkpoint_removes_the_snapshot_and_its_folders(tmpdir_env, sandbox):
    """"Snapshots are cleaned up when: A checkpoint is explicitly deleted via
    delete_checkpoint()" — nothing of it stays, empty folders included."""
    from patchbox.plan.checkpoint import CheckpointManager

    with CheckpointManager() as mgr:
        top = Path(mgr.storage_dir)
        cp = mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {})
        assert Path(cp.snapshot_path).exists()
        assert mgr.delete_checkpoint(cp.checkpoint_id) is True
        assert not Path(cp.snapshot_path).exists()
        assert entries(top) == []
        assert mgr.delete_checkpoint(cp.checkpoint_id) is False


def test_cleanup_and_close_remove_every_snapshot(tmpdir_env, sandbox):
    """"The checkpoint manager goes out of scope (manual cleanup recommended)": cleanup()
    removes what the manager made; close() removes its folder under the temp folder."""
    from patchbox.plan.checkpoint import CheckpointManager

    mgr = CheckpointManager()
    top = Path(mgr.storage_dir)
    for phase in ("pre_execute", "post_execute", "pre_apply"):
        mgr.create_checkpoint(sandbox, PLAN, phase, {})
    assert mgr.cleanup() == 3
    assert entries(top) == [] and mgr.list_checkpoints(sandbox.sandbox_id) == []
    mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {})
    mgr.close()
    assert not top.exists() and entries(tmpdir_env) == []


def test_a_cleaned_up_sandbox_leaves_nothing_at_close(tmpdir_env, manager, sandbox):
    """Cleaning the sandbox up, then closing the manager, leaves no folder behind."""
    from patchbox.plan.checkpoint import CheckpointManager

    mgr = CheckpointManager()
    mgr.create_checkpoint(sandbox, PLAN, "pre_execute", {})
    manager.cleanup_all(PLAN)
    assert mgr.list_checkpoints(sandbox.sandbox_id) == []
    mgr.cleanup()
    assert entries(Path(mgr.storage_dir)) == []
    mgr.close()
    assert entries(tmpdir_env) == []


# ------------------------------------------------------------------ Thread Safety


def test_the_manager_is_thread_safe(tmpdir_env, manager, tmp_path):
    """"The CheckpointManager is thread-safe": checkpoints of eight sandboxes taken from
    eight threads at once are all there, each restoring its own sandbox."""
    from patchbox.plan.checkpoint import CheckpointManager

    sbs = []
    for i in range(8):
        d = tmp_path / f"p{i}"
        write(d / "f.txt", f"{i}\n")
        sbs.append(manager.get_or_create_sandbox(PLAN, f"r{i}", d, "copy_on_write"))
    with CheckpointManager() as mgr:
        errors: List[BaseException] = []
        taken: Dict[str, Any] = {}

        def work(sb) -> None:
            try:
                taken[sb.sandbox_id] = mgr.create_checkpoint(sb, PLAN, "pre_execute", {})
                Path(sb.get_path("f.txt")).write_text("changed\n")
                assert mgr.rollback_to(taken[sb.sandbox_id])
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(sb,)) for sb in sbs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for i, sb in enumerate(sbs):
            assert Path(sb.get_path("f.txt")).read_text() == f"{i}\n"
            assert [c.checkpoint_id for c in mgr.list_checkpoints(sb.sandbox_id)] == [taken[sb.sandbox_id].checkpoint_id]


# ------------------------------------------------------------------ Plan Executor / Apply Service


class Spy:
    """A checkpoint manager that records the hooks' calls and forwards them."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: List[str] = []

    def create_checkpoint(self, sandbox, plan_id, phase, metadata=None):
        self.calls.append(f"create {phase} {sandbox.sandbox_id}")
        return self.inner.create_checkpoint(sandbox, plan_id, phase, metadata)

    def rollback_to(self, cp):
        self.calls.append(f"rollback_to {cp.phase} {cp.sandbox_id}")
        return self.inner.rollback_to(cp)


def test_plan_executor_hooks_on_success(tmpdir_env, manager, sandbox):
    """"Before run_execute: create_checkpoint(sandbox, plan_id, "pre_execute")" and "After
    successful execute: create_checkpoint(sandbox, plan_id, "post_execute")"."""
    from patchbox.plan.checkpoint import CheckpointManager
    from patchbox.plan.executor import PlanExecutor

    with CheckpointManager() as cm:
        spy = Spy(cm)
        executor = PlanExecutor(manager, checkpoint_manager=spy)

        def execute() -> str:
            assert spy.calls == [f"create pre_execute {sandbox.sandbox_id}"]
            Path(sandbox.get_path("notes.txt")).write_text("done\n")
            return "ok"

        assert executor.run_execute(PLAN, execute) == "ok"
        assert spy.calls == [f"create pre_execute {sandbox.sandbox_id}", f"create post_execute {sandbox.sandbox_id}"]
        assert [c.phase for c in cm.list_checkpoints(sandbox.sandbox_id)] == ["pre_execute", "post_execute"]
        assert cm.list_checkpoints(sandbox.sandbox_id)[1].metadata == {"status": "success"}


def test_plan_executor_rolls_back_on_execute_failure(tmpdir_env, manager, sandbox):
    """"On execute failure: rollback_to(last_checkpoint)"; the failure propagates."""
    from patchbox.plan.checkpoint import CheckpointManager
    from patchbox.plan.executor import PlanExecutor

    with CheckpointManager() as cm:
        spy = Spy(cm)
        executor = PlanExecutor(sandbox_manager=manager, checkpoint_manager=spy)

        def execute() -> None:
            Path(sandbox.get_path("notes.txt")).write_text("half done\n")
            raise RuntimeError("the model gave up")

        with pytest.raises(RuntimeError, match="gave up"):
            executor.run_execute(PLAN, execute)
        assert spy.calls == [f"create pre_execute {sandbox.sandbox_id}", f"rollback_to pre_execute {sandbox.sandbox_id}"]
        assert Path(sandbox.get_path("notes.txt")).read_text() == "one\n"


def test_plan_executor_without_a_checkpoint_manager_skips_the_hooks(root, manager, sandbox, tmpdir_env):
    """"When no CheckpointManager is injected, all hooks are silently skipped." """
    from patchbox.plan.executor import PlanExecutor

    executor = PlanExecutor(manager)
    with pytest.raises(ValueError):
        executor.run_execute(PLAN, lambda: (Path(sandbox.get_path("notes.txt")).write_text("kept\n"), int("x")))
    assert Path(sandbox.get_path("notes.txt")).read_text() == "kept\n"  # nothing rolled back
    assert executor.run_execute(PLAN, lambda: 7) == 7
    assert entries(tmpdir_env) == [] and executor.last_checkpoints == {}


def test_plan_executor_takes_the_checkpoint_manager_alone(tmpdir_env, sandbox):
    """``PlanExecutor(checkpoint_manager=...)``: the sandboxes may be given per run."""
    from patchbox.plan.checkpoint import CheckpointManager
    from patchbox.plan.executor import PlanExecutor

    with CheckpointManager() as cm:
        executor = PlanExecutor(checkpoint_manager=cm)
        with pytest.raises(KeyError):
            executor.run_execute(PLAN, lambda: {}["missing"], sandboxes=[sandbox])
        assert [c.phase for c in cm.list_checkpoints(sandbox.sandbox_id)] == ["pre_execute"]


def test_plan_apply_service_checkpoints_before_apply(tmpdir_env, manager, sandbox, project):
    """"Before apply: create_checkpoint(sandbox, plan_id, "pre_apply")"; a successful apply
    rolls nothing back."""
    from patchbox.plan.checkpoint import CheckpointManager
    from patchbox.plan.executor import PlanApplyService

    Path(sandbox.get_path("notes.txt")).write_text("applied\n")
    with CheckpointManager() as cm:
        spy = Spy(cm)
        results = PlanApplyService(manager, checkpoint_manager=spy).apply(PLAN)
        assert [r.success for r in results] == [True]
        assert spy.calls == [f"create pre_apply {sandbox.sandbox_id}"]
        assert (project / "notes.txt").read_text() == "applied\n"


def test_plan_apply_service_rolls_back_on_apply_failure(tmpdir_env, manager, sandbox, project):
    """"Allows rollback if the apply fails or encounters merge conflicts" and "On apply
    failure: rollback_to(last_checkpoint)"."""
    from patchbox.plan.checkpoint import CheckpointManager
    from patchbox.plan.executor import PlanApplyService

    Path(sandbox.get_path("notes.txt")).write_text("sandbox\n")
    (project / "notes.txt").write_text("user's edit\n")  # a merge conflict
    with CheckpointManager() as cm:
        spy = Spy(cm)
        results = PlanApplyService(manager, checkpoint_manager=spy).apply(PLAN)
        assert [r.success for r in results] == [False] and "notes.txt" in (results[0].error or "")
        assert spy.calls == [f"create pre_apply {sandbox.sandbox_id}", f"rollback_to pre_apply {sandbox.sandbox_id}"]
        assert (project / "notes.txt").read_text() == "user's edit\n"
        assert Path(sandbox.get_path("notes.txt")).read_text() == "sandbox\n"
