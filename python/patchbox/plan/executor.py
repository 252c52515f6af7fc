"""``PlanExecutor`` and ``PlanApplyService``: a plan's Execute and Apply phases with the
checkpoint hooks of the plan executors' documentation.

- ``PlanExecutor(sandbox_manager, checkpoint_manager=None).run_execute(plan_id, execute)``:
  ``create_checkpoint(sandbox, plan_id, "pre_execute")`` for each sandbox of the plan, then
  ``execute()``; after it succeeds ``create_checkpoint(sandbox, plan_id, "post_execute",
  {"status": "success"})``; when it raises, ``rollback_to(last_checkpoint)`` for each and
  the exception propagates.
- ``PlanApplyService(sandbox_manager, checkpoint_manager=None).apply(plan_id)``:
  ``create_checkpoint(sandbox, plan_id, "pre_apply")``, then ``commit_all``; when the apply
  fails (it raises, or returns the failed result of a sandbox-level failure),
  ``rollback_to(last_checkpoint)`` for each; returns ``commit_all``'s results.

When no checkpoint manager is injected, every hook is silently skipped. The hooks are calls
on the injected object (any ``CheckpointHooks``), so a wrapper or a test double sees them.
The sandboxes of a phase are the plan's created and active ones that can be checkpointed
(``none`` cannot: its writes went to the original), or those passed as ``sandboxes``. C++ has
the same two classes (``patchbox::plan::PlanExecutor``, ``PlanApplyService``); Rust has the
flow as ``plan::phases::PhaseRunner``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Protocol, Sequence, TypeVar

from .._native import SandboxManager, SandboxStatus
from .._records import CommitResult, SandboxCheckpoint
from ..checkpoint import POST_EXECUTE, PRE_APPLY, PRE_EXECUTE
from ..errors import SandboxError

__all__ = ["PlanExecutor", "PlanApplyService", "CheckpointHooks"]

_T = TypeVar("_T")


class CheckpointHooks(Protocol):
    """What the services call on their ``checkpoint_manager``: a ``CheckpointManager``, or
    anything with these two methods (a wrapper that logs them, a test double)."""

    def create_checkpoint(
        self, sandbox: Any, plan_id: str, phase: str, metadata: Optional[Dict[str, str]] = None
    ) -> SandboxCheckpoint: ...

    def rollback_to(self, checkpoint: SandboxCheckpoint) -> bool: ...


class _Phase:
    """What both services share: the manager, the optional checkpoint manager, the last
    checkpoints taken."""

    def __init__(
        self,
        sandbox_manager: Optional[SandboxManager] = None,
        checkpoint_manager: Optional[CheckpointHooks] = None,
    ) -> None:
        self.sandbox_manager = sandbox_manager
        self.checkpoint_manager = checkpoint_manager
        #: sandbox id → the last checkpoint a hook took of it.
        self.last_checkpoints: Dict[str, SandboxCheckpoint] = {}

    def _sandboxes(self, plan_id: str, sandboxes: Optional[Iterable[Any]]) -> List[Any]:
        if sandboxes is not None:
            return list(sandboxes)
        if self.sandbox_manager is None:
            raise SandboxError(
                "no sandbox_manager was given: pass the phase's sandboxes, or construct the "
                "service with sandbox_manager=..."
            )
        return [
            s
            for s in self.sandbox_manager.list_sandboxes(plan_id)
            if s.status in (SandboxStatus.CREATED, SandboxStatus.ACTIVE) and s.strategy != "none"
        ]

    def _checkpoint(self, sandboxes: Sequence[Any], plan_id: str, phase: str, metadata: Dict[str, str]) -> None:
        cm = self.checkpoint_manager
        if cm is None:
            return
        for sb in sandboxes:
            self.last_checkpoints[sb.sandbox_id] = cm.create_checkpoint(sb, plan_id, phase, dict(metadata))

    def _roll_back(self, sandboxes: Sequence[Any]) -> List[str]:
        """Rolls each sandbox back to its last checkpoint, newest sandbox first; returns the
        failures (``"<sandbox id>: <error>"``), having tried them all."""
        cm = self.checkpoint_manager
        failures: List[str] = []
        if cm is None:
            return failures
        for sb in reversed(list(sandboxes)):
            cp = self.last_checkpoints.get(sb.sandbox_id)
            if cp is None:
                continue
            try:
                cm.rollback_to(cp)
            except Exception as e:  # every sandbox is tried; the phase's own error wins
                failures.append(f"{sb.sandbox_id}: {e}")
        return failures


def _note_failures(exc: BaseException, failures: List[str]) -> None:
    if failures:
        try:
            setattr(exc, "rollback_failures", failures)
        except AttributeError:
            pass


class PlanExecutor(_Phase):
    """Runs a plan's Execute phase with the ``pre_execute``/``post_execute`` hooks and the
    rollback on failure (see the module docs)."""

    def run_execute(
        self,
        plan_id: str,
        execute: Callable[[], _T],
        sandboxes: Optional[Iterable[Any]] = None,
    ) -> _T:
        """Runs ``execute()`` as the Execute phase of ``plan_id``; returns what it returns."""
        sbs = self._sandboxes(plan_id, sandboxes)
        self._checkpoint(sbs, plan_id, PRE_EXECUTE, {})
        try:
            result = execute()
        except BaseException as exc:
            _note_failures(exc, self._roll_back(sbs))
            raise
        self._checkpoint(sbs, plan_id, POST_EXECUTE, {"status": "success"})
        return result


class PlanApplyService(_Phase):
    """Runs a plan's Apply phase with the ``pre_apply`` hook and the rollback on failure (see
    the module docs)."""

    def apply(self, plan_id: str, sandboxes: Optional[Iterable[Any]] = None) -> List[CommitResult]:
        """Commits the plan (``commit_all``) between a ``pre_apply`` checkpoint and, on
        failure, the rollback to it; returns ``commit_all``'s results."""
        if self.sandbox_manager is None:
            raise SandboxError("PlanApplyService.apply needs the sandbox_manager that commits the plan")
        sbs = self._sandboxes(plan_id, sandboxes)
        self._checkpoint(sbs, plan_id, PRE_APPLY, {})
        try:
            results = self.sandbox_manager.commit_all(plan_id)
        except BaseException as exc:
            _note_failures(exc, self._roll_back(sbs))
            raise
        if not all(r.success for r in results):
            self._roll_back(sbs)
        return results
