"""The plan layer: a sandbox per resource for a plan's Execute phase, reviewed by diff and
committed all or nothing in its Apply phase.

``SandboxManager`` (also ``patchbox.plan.Manager``; the Rust ``patchbox::plan::Manager``) makes sandboxes lazily per ``(plan_id,
resource_id)`` with a strategy (``none``, ``copy_on_write``, ``overlay``, ``git_worktree``,
``transaction_rollback``, or a registered custom one); each sandbox is an instance of its
strategy's class (``CopyOnWriteSandbox``, …) and satisfies the ``Sandbox`` protocol.
``commit_all`` commits a plan's sandboxes atomically: a failure rolls the committed ones back
newest first; a sandbox-level failure (a ``SandboxError``) then returns the one failed
``CommitResult``, any other raises ``AtomicCommitError`` with ``rolled_back_ids`` and
``failed_rollback_ids``.

The submodules follow the plan executors' documentation, one per documented module
(``cleveragents.infrastructure.sandbox.X`` → ``patchbox.plan.X``): ``protocol``, ``manager``,
``factory``, ``strategy_registry``, ``strategy_adapter``, ``_fs_utils``, ``sandbox_strategy``
(the models of ``cleveragents.domain.models.core.sandbox_strategy``), ``resource``, plus
``sandboxes`` (the strategy classes), ``checkpoint`` and ``executor`` (``PlanExecutor``,
``PlanApplyService``). Every name is also importable from ``patchbox.plan`` and ``patchbox``.

Context managers: ``with SandboxManager(root) as manager:`` closes the manager on exit
(sandboxes holding no uncommitted work are cleaned up; an active sandbox with changes stays on
disk, where the next manager over the root finds it). ``with manager.get_or_create_sandbox(...)
as sb:`` cleans the sandbox up on exit unless it holds uncommitted changes: work is never
thrown away silently — commit it, or ``rollback()`` it, to let the exit clean up.

Every class is thread-safe; calls that touch the disk release the GIL.
"""

from .._native import DiffEntry, SandboxDiff, SandboxStrategy, SnapshotInfo
from . import _fs_utils
from .checkpoint import CheckpointManager, PhaseRunner, SandboxCheckpoint
from .executor import CheckpointHooks, PlanApplyService, PlanExecutor
from .factory import SandboxFactory
from .manager import SandboxManager
from .protocol import CommitResult, Sandbox, SandboxContext, SandboxStatus
from .resource import Resource, ResourceRegistry
from .sandbox_strategy import DiffView, SandboxRef, SandboxStrategyProtocol
from .sandboxes import (
    BaseSandbox,
    CopyOnWriteSandbox,
    CustomSandbox,
    GitWorktreeSandbox,
    NoSandbox,
    OverlaySandbox,
    TransactionSandbox,
)
from .strategy_adapter import BuiltInSandboxStrategyAdapter
from .strategy_registry import SandboxStrategyRegistry

#: The plan family's manager under the family's module: ``patchbox.plan.Manager`` is
#: ``SandboxManager`` (the plan executors' documented name, which stays). Kept out of
#: ``__all__`` so ``from patchbox import *`` does not bind a bare ``Manager``.
Manager = SandboxManager

__all__ = [
    "BaseSandbox",
    "BuiltInSandboxStrategyAdapter",
    "CheckpointHooks",
    "CheckpointManager",
    "CommitResult",
    "CopyOnWriteSandbox",
    "CustomSandbox",
    "DiffEntry",
    "DiffView",
    "GitWorktreeSandbox",
    "NoSandbox",
    "OverlaySandbox",
    "PhaseRunner",
    "PlanApplyService",
    "PlanExecutor",
    "Resource",
    "ResourceRegistry",
    "Sandbox",
    "SandboxCheckpoint",
    "SandboxContext",
    "SandboxDiff",
    "SandboxFactory",
    "SandboxManager",
    "SandboxRef",
    "SandboxStatus",
    "SandboxStrategy",
    "SandboxStrategyProtocol",
    "SandboxStrategyRegistry",
    "SnapshotInfo",
    "TransactionSandbox",
]
