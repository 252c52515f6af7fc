"""PhaseRunner: the plan executor's checkpoint hooks around Execute and Apply."""

from __future__ import annotations

from pathlib import Path

import pytest

import patchbox
from patchbox import CheckpointManager, PhaseRunner
from _plan_fixtures import manager, project, root, write  # noqa: F401


class ModelGaveUp(Exception):
    pass


def test_failed_execute_is_rolled_back_and_reraised(manager, project, root):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    with CheckpointManager(root) as cps:
        runner = PhaseRunner(manager, cps)

        def failing() -> None:
            Path(sb.get_path("notes.txt")).write_text("half done\n")
            raise ModelGaveUp("the model gave up")

        with pytest.raises(ModelGaveUp) as e:
            runner.execute("p", failing)
        assert e.value.restored == [sb.sandbox_id]
        assert Path(sb.get_path("notes.txt")).read_text() == "one\n"

        def working() -> str:
            Path(sb.get_path("notes.txt")).write_text("two\n")
            return "done"

        assert runner.execute("p", working) == "done"
        phases = [c.phase for c in cps.list_checkpoints(sb.sandbox_id)]
        assert phases == ["pre_execute", "pre_execute", "post_execute"]
        [r] = runner.apply("p")
        assert r.success and (project / "notes.txt").read_text() == "two\n"
        assert cps.list_checkpoints(sb.sandbox_id)[-1].phase == "pre_apply"


def test_failed_apply_restores_pre_apply(manager, project, root, tmp_path):
    other = tmp_path / "other"
    write(other / "x.txt", "x\n")
    a = manager.get_or_create_sandbox("p", "a", other, "copy_on_write")
    b = manager.get_or_create_sandbox("p", "b", project, "copy_on_write")
    Path(a.get_path("x.txt")).write_text("A\n")
    Path(b.get_path("notes.txt")).write_text("B\n")
    (project / "notes.txt").write_text("user\n")  # a conflict: commit_all refuses
    with CheckpointManager(root) as cps:
        with pytest.raises(patchbox.SandboxCommitError) as e:  # the conflict, a sandbox-level failure
            PhaseRunner(manager, cps).apply("p")
        assert sorted(e.value.restored) == sorted([a.sandbox_id, b.sandbox_id])
        assert e.value.phase == "apply"
    assert (other / "x.txt").read_text() == "x\n"
    assert Path(a.get_path("x.txt")).read_text() == "A\n"


def test_without_checkpoints_the_hooks_are_skipped(manager, project):
    sb = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    runner = PhaseRunner(manager)

    def failing() -> None:
        Path(sb.get_path("notes.txt")).write_text("kept\n")
        raise ModelGaveUp("no checkpoints")

    with pytest.raises(ModelGaveUp):
        runner.execute("p", failing)
    assert Path(sb.get_path("notes.txt")).read_text() == "kept\n"
    assert [r.success for r in runner.apply("p")] == [True]
