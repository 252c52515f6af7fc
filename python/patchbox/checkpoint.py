"""Checkpoints of plan sandboxes, and rollback to them.

``CheckpointManager(root)`` (a directory or a ``SandboxManager``; without one, a folder of its
own under the system temp folder, removed with its checkpoints on ``close()``) records a
sandbox's state at a phase — ``PRE_EXECUTE``, ``POST_EXECUTE``, ``PRE_APPLY`` or any name —
as a ``SandboxCheckpoint`` (a frozen Pydantic model: ``model_dump``, ``model_validate``; a
``plan_id`` that is not the sandbox's is refused); ``rollback_to(cp)`` makes the sandbox
exactly what it was then; ``cleanup()`` removes every checkpoint the manager made.
A checkpoint stores what changed against the sandbox's base, content-addressed: it costs what
changed, not a copy. With a root, checkpoints live in the sandbox's directory (cleaning the
sandbox up removes them); those a manager made are removed when it is closed (``with`` or ``close()``)
or collected, unless ``keep()`` was called. A ``transaction_rollback`` sandbox checkpoints
with savepoints; ``none`` cannot be checkpointed (``SandboxError``).

``PhaseRunner(manager, checkpoint_manager)`` runs the hooks of the plan executor natively
(``patchbox.plan.PlanExecutor`` and ``PlanApplyService`` are the documented classes, in Python):
``execute(plan_id, fn)`` takes ``pre_execute`` checkpoints, calls ``fn()``, takes
``post_execute`` checkpoints — or, when ``fn`` raises, rolls every sandbox back to
``pre_execute`` and re-raises; ``apply(plan_id)`` takes ``pre_apply`` checkpoints and runs
``commit_all``, rolling back to them when it fails. Without a checkpoint manager the hooks
are skipped.
"""

from ._native import CheckpointManager, PhaseRunner
from ._records import SandboxCheckpoint

#: Before the Execute phase.
PRE_EXECUTE = "pre_execute"
#: After a successful Execute phase.
POST_EXECUTE = "post_execute"
#: Before the Apply phase.
PRE_APPLY = "pre_apply"

__all__ = ["CheckpointManager", "PhaseRunner", "SandboxCheckpoint", "PRE_EXECUTE", "POST_EXECUTE", "PRE_APPLY"]
