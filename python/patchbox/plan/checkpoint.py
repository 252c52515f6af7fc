"""``CheckpointManager`` and ``SandboxCheckpoint`` in the plan package (see
``patchbox.checkpoint`` for the whole story)."""

from ..checkpoint import (
    POST_EXECUTE,
    PRE_APPLY,
    PRE_EXECUTE,
    CheckpointManager,
    PhaseRunner,
    SandboxCheckpoint,
)

__all__ = ["CheckpointManager", "SandboxCheckpoint", "PhaseRunner", "PRE_EXECUTE", "POST_EXECUTE", "PRE_APPLY"]
