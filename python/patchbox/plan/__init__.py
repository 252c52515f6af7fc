"""The plan layer: a sandbox per resource for a plan's Execute phase, reviewed by diff and
committed all or nothing in its Apply phase.

``SandboxManager`` (the Rust ``PlanManager``) makes sandboxes lazily per ``(plan_id,
resource_id)`` with a strategy (``none``, ``copy_on_write``, ``overlay``, ``git_worktree``,
``transaction_rollback``, or a registered custom one), and ``commit_all`` commits a plan's
sandboxes atomically: a failure rolls the committed ones back newest first and raises
``AtomicCommitError`` with ``rolled_back_ids`` and ``failed_rollback_ids``.

Context managers: ``with SandboxManager(root) as manager:`` closes the manager on exit
(sandboxes holding no uncommitted work are cleaned up; an active sandbox with changes stays on
disk, where the next manager over the root finds it). ``with manager.get_or_create_sandbox(...)
as sb:`` cleans the sandbox up on exit unless it holds uncommitted changes: work is never
thrown away silently — commit it, or ``rollback()`` it, to let the exit clean up.

Every class is thread-safe; calls that touch the disk release the GIL.
"""

from ._native import (
    CommitResult,
    DiffEntry,
    Resource,
    ResourceRegistry,
    Sandbox,
    SandboxContext,
    SandboxDiff,
    SandboxManager,
    SandboxStatus,
    SandboxStrategy,
    SnapshotInfo,
)

__all__ = [
    "CommitResult",
    "DiffEntry",
    "Resource",
    "ResourceRegistry",
    "Sandbox",
    "SandboxContext",
    "SandboxDiff",
    "SandboxManager",
    "SandboxStatus",
    "SandboxStrategy",
    "SnapshotInfo",
]
