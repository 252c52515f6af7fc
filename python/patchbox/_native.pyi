"""Type stubs of the compiled module ``patchbox._native``.

One file, longer than the usual limit, on purpose: type checkers read the stub of an
extension module from the single ``_native.pyi`` beside it, so it cannot be split the way the
Python sources are.
"""

import os
from datetime import datetime
from types import TracebackType
from typing import Any, Callable, ClassVar, Dict, List, Literal, Optional, Sequence, Tuple, Type, TypeVar, Union, final

__version__: str

# The exceptions the module raises are defined in Python: patchbox/errors.py; the records
# SandboxContext, CommitResult, SandboxRef (frozen dataclasses) and SandboxCheckpoint (a frozen
# Pydantic model) in patchbox/_records.py.
from ._records import CommitResult, SandboxCheckpoint, SandboxContext, SandboxRef

# ---------------------------------------------------------------- plan layer (plan.rs, checkpoint.rs, custom.rs)

class SandboxStatus:
    """Where a sandbox is in its lifecycle (``SandboxStatus.ACTIVE.value == "active"``)."""
    PENDING: ClassVar[SandboxStatus]
    CREATED: ClassVar[SandboxStatus]
    ACTIVE: ClassVar[SandboxStatus]
    COMMITTED: ClassVar[SandboxStatus]
    ROLLED_BACK: ClassVar[SandboxStatus]
    CLEANED_UP: ClassVar[SandboxStatus]
    ERRORED: ClassVar[SandboxStatus]
    @property
    def value(self) -> str:
        """The snake_case name (``"rolled_back"``), as on disk."""
    @staticmethod
    def can_transition(from_: SandboxStatus, to: SandboxStatus) -> bool:
        """Whether a sandbox in ``from_`` may move to ``to``."""
    @staticmethod
    def assert_transition(from_: SandboxStatus, to: SandboxStatus) -> None:
        """Returns when a sandbox in ``from_`` may move to ``to``; raises ``SandboxStateError``
        (``from_status``, ``to_status``) when it may not.
        """
    @classmethod
    def members(cls) -> List[SandboxStatus]:
        """Every status, in lifecycle order."""

class SandboxStrategy:
    """The built-in strategies; wherever a strategy is taken, its name as a ``str`` works too
    (a custom strategy has only its registered name).
    """
    NONE: ClassVar[SandboxStrategy]
    COPY_ON_WRITE: ClassVar[SandboxStrategy]
    OVERLAY: ClassVar[SandboxStrategy]
    GIT_WORKTREE: ClassVar[SandboxStrategy]
    TRANSACTION_ROLLBACK: ClassVar[SandboxStrategy]
    @property
    def value(self) -> str:
        """The strategy's name (``"git_worktree"``)."""
    @property
    def is_rollbackable(self) -> bool:
        """Whether a commit of it can be undone (``commit_all`` commits these first)."""

_Strategy = Union[SandboxStrategy, str]
_Path = Union[str, "os.PathLike[str]"]
_SqlValue = Union[None, int, float, str, bytes]

@final
class SnapshotInfo:
    """A shared snapshot of an original (``SandboxManager.prepare_snapshot``): the lower layer
    of every ``overlay`` sandbox created for that original after it was taken.
    """
    @property
    def id(self) -> str:
        """Its ULID (the greatest is the newest)."""
    @property
    def original(self) -> str:
        """The original it is a snapshot of (canonical path)."""
    @property
    def created_at(self) -> datetime:
        """When it was taken (aware, UTC)."""
    @property
    def files(self) -> int:
        """How many files and symlinks it holds."""
    @property
    def path(self) -> str:
        """Where its files are."""

@final
class DiffEntry:
    """One changed path. ``operation`` is ``"added"``, ``"modified"`` or ``"deleted"``;
    ``before``/``after`` are the contents (``None`` on the side where the path does not exist);
    modes are git's (``0o100644``, ``0o100755``, ``0o120000``), ``None`` where unknown.
    """
    def __init__(
        self,
        path: str,
        operation: str,
        before: Optional[bytes] = None,
        after: Optional[bytes] = None,
        before_mode: Optional[int] = None,
        after_mode: Optional[int] = None,
    ) -> None:
        """An entry, as a custom strategy's ``diff`` returns them."""
    @property
    def path(self) -> str:
        """The path, relative to the resource."""
    @property
    def operation(self) -> str:
        """``"added"``, ``"modified"`` or ``"deleted"``."""
    @property
    def before(self) -> Optional[bytes]:
        """The content before; ``None`` for an added path."""
    @property
    def after(self) -> Optional[bytes]:
        """The content after; ``None`` for a deleted path."""
    @property
    def before_mode(self) -> Optional[int]:
        """The git mode before, ``None`` where unknown."""
    @property
    def after_mode(self) -> Optional[int]:
        """The git mode after, ``None`` where unknown."""

@final
class SandboxDiff:
    """A sandbox's changes, per path and as a patch ``git apply`` accepts."""
    @property
    def entries(self) -> List[DiffEntry]:
        """One entry per changed path, sorted by path."""
    @property
    def patch(self) -> bytes:
        """The changes as a git patch (for ``transaction_rollback``, a readable summary per table)."""
    @property
    def summary(self) -> str:
        """``"2 added, 1 modified"``, or ``"no changes"``."""
    def __len__(self) -> int:
        """The number of changed paths."""

@final
class DiffView:
    """A custom strategy's view of a sandbox's changes (what its ``diff`` returns)."""
    def __init__(self, sandbox_id: str, entries: List[DiffEntry], summary: Optional[str] = None) -> None:
        """A view of ``entries``; ``summary`` defaults to counts such as ``"1 added, 2 modified"``."""
    @property
    def sandbox_id(self) -> str:
        """The sandbox the changes are in."""
    @property
    def entries(self) -> List[DiffEntry]:
        """One entry per changed path."""
    @property
    def summary(self) -> str:
        """A one-line summary of the changes."""

@final
class Resource:
    """A resource of a plan: ``kind`` is ``"git_repository"``, ``"directory"``, ``"file"``,
    ``"database"`` or any other name.
    """
    def __init__(
        self,
        resource_id: str,
        kind: str,
        path: _Path,
        parent: Optional[str] = None,
        sandbox_strategy: Optional[_Strategy] = None,
    ) -> None:
        """A resource at ``path``, under ``parent`` if given; ``sandbox_strategy`` is the strategy of
        its sandbox when it is a boundary (default: ``git_worktree`` for a repository,
        ``copy_on_write`` otherwise).
        """
    @property
    def resource_id(self) -> str:
        """The resource's id."""
    @property
    def id(self) -> str:
        """The same as ``resource_id``."""
    @property
    def kind(self) -> str:
        """``"git_repository"``, ``"directory"``, ``"file"``, ``"database"`` or another name."""
    @property
    def path(self) -> str:
        """Where the resource is."""
    @property
    def parent(self) -> Optional[str]:
        """The id of the resource it lies in, if any."""
    @property
    def sandbox_strategy(self) -> str:
        """The strategy of its sandbox when it is a boundary."""

@final
class ResourceRegistry:
    """The resources of a plan, by id."""
    def __init__(self, resources: Optional[List[Resource]] = None) -> None:
        """An empty registry, or one holding ``resources`` (added in order: parents first)."""
    def add(self, resource: Resource) -> None:
        """Adds a resource; a taken id or an unknown parent raises ``SandboxError``."""
    def get(self, resource_id: str) -> Optional[Resource]:
        """The resource ``resource_id``, or ``None``."""
    def resolve_boundary(self, resource_id: str) -> str:
        """The id of the boundary resource ``resource_id`` belongs to (``SandboxError`` for an
        unknown id).
        """
    def __len__(self) -> int:
        """The number of resources."""

class Sandbox:
    """One resource's sandbox in one plan (from ``SandboxManager.get_or_create_sandbox``): the
    native base of the strategy classes below; every sandbox is an instance of its strategy's
    class. Re-exported as ``patchbox.plan.BaseSandbox`` (``patchbox.Sandbox`` is the protocol).

    A context manager: leaving ``with sandbox:`` cleans it up unless it holds uncommitted
    changes. Failures raise ``SandboxError`` or a subclass; a call not valid in the sandbox's
    status raises ``SandboxStateError``.
    """
    @property
    def sandbox_id(self) -> str:
        """The sandbox's ULID."""
    @property
    def strategy(self) -> str:
        """Its strategy's name."""
    @property
    def status(self) -> SandboxStatus:
        """Where it is in its lifecycle."""
    @property
    def context(self) -> Optional[SandboxContext]:
        """What it is (paths, plan, resource); ``None`` before ``create``."""
    @property
    def is_rollbackable(self) -> bool:
        """Whether a commit of it can be undone."""
    def create(self, plan_id: str) -> SandboxContext:
        """Makes the sandbox environment (pending -> created) and returns its context;
        ``get_or_create_sandbox`` has already done it for the sandboxes it returns. Raises
        ``SandboxCreationError`` when it cannot be made.
        """
    def get_path(self, resource_path: str = "") -> str:
        """The absolute path of ``resource_path`` (relative to the resource) in the sandbox; makes a
        created sandbox active. Absolute paths, ``..`` and symlinks out of the sandbox raise
        ``SandboxError``.
        """
    def read(self, resource_path: str) -> Optional[bytes]:
        """The content of ``resource_path`` in the sandbox; ``None`` when it does not exist there."""
    def write(self, resource_path: str, content: bytes) -> None:
        """Sets the content of ``resource_path`` in the sandbox (parents made as needed)."""
    def diff(self) -> SandboxDiff:
        """The changes against what the sandbox was made from."""
    def check_commit(self) -> None:
        """Checks, writing nothing, that ``commit`` would succeed now; raises
        ``SandboxCommitError`` naming the conflicting files when it would not.
        """
    def commit(self, message: Optional[str] = None) -> CommitResult:
        """Brings the sandbox's changes into the original (active -> committed) and returns the
        result. A conflict with the original raises ``SandboxCommitError`` (``files``) and
        writes nothing.
        """
    def rollback(self) -> None:
        """Active: discards the changes. Committed: undoes the commit in the original (refused,
        ``SandboxRollbackError`` naming the files, when they were changed since).
        """
    def cleanup(self) -> None:
        """Removes every artefact (an active sandbox's changes are discarded). Idempotent."""
    def execute(self, sql: str, params: Sequence[_SqlValue] = ...) -> List[Tuple[Any, ...]]:
        """``transaction_rollback`` only: runs one SQL statement (``?1``, ``?2``... parameters)
        inside the sandbox's transaction and returns its rows as tuples. Other strategies raise
        ``SandboxError``.
        """
    def savepoint(self, name: str) -> None:
        """``transaction_rollback`` only: ``SAVEPOINT name``."""
    def rollback_to_savepoint(self, name: str) -> None:
        """``transaction_rollback`` only: ``ROLLBACK TO name``."""
    def __enter__(self) -> Sandbox:
        """Returns the sandbox."""
    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> Literal[False]:
        """Cleans the sandbox up unless it holds uncommitted changes (kept, never lost);
        exceptions propagate.
        """

@final
class NoSandbox(Sandbox):
    """A sandbox of the ``none`` strategy: writes go to the original; nothing to roll back."""

@final
class CopyOnWriteSandbox(Sandbox):
    """A sandbox of the ``copy_on_write`` strategy: a copy of the resource's tree."""

@final
class OverlaySandbox(Sandbox):
    """A sandbox of the ``overlay`` strategy (a copy where the kernel refuses the mount)."""

@final
class GitWorktreeSandbox(Sandbox):
    """A sandbox of the ``git_worktree`` strategy: a worktree on a branch of its own."""

@final
class TransactionSandbox(Sandbox):
    """A sandbox of the ``transaction_rollback`` strategy: a transaction on a SQLite file."""

@final
class CustomSandbox(Sandbox):
    """A sandbox of a registered custom strategy (``strategy`` is the registered name)."""

class StrategyRegistry:
    """The native registry of custom strategies a ``SandboxManager`` makes sandboxes of; use its
    subclass ``patchbox.SandboxStrategyRegistry``.
    """
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """An empty registry (the arguments are the subclass's)."""
    def _register_driver(self, name: str, factory: Callable[[], Any]) -> None:
        """Registers ``name``: ``factory()`` makes the driver of each new or reopened sandbox. A
        built-in's name or a taken one raises ``SandboxError``.
        """
    def has_custom_strategy(self, name: str) -> bool:
        """Whether a strategy is registered under ``name``."""
    def names(self) -> List[str]:
        """The registered names, sorted."""

@final
class BuiltInSandboxStrategyAdapter:
    """A built-in strategy behind the nine-operation strategy protocol. A failure raises the
    step's error: ``SandboxCreationError`` (create), ``SandboxCommitError`` (commit),
    ``SandboxRollbackError`` (rollback), else ``SandboxError``.
    """
    def __init__(self, strategy_name: str, root: Optional[_Path] = None) -> None:
        """An adapter of the built-in ``strategy_name``; its sandboxes live under ``root`` (default:
        ``<default root>/adapter``). An unknown name raises ``SandboxError``.
        """
    @property
    def strategy_name(self) -> str:
        """The adapted strategy's name."""
    def create(self, plan_id: str, resource: Resource) -> SandboxRef:
        """Makes a sandbox of ``resource`` for ``plan_id``; returns its reference."""
    def read(self, r: SandboxRef, path: str) -> Optional[bytes]:
        """The content of ``path`` in the sandbox; ``None`` when it does not exist there."""
    def write(self, r: SandboxRef, path: str, content: bytes) -> DiffEntry:
        """Sets the content of ``path`` in the sandbox; returns the change (``added`` or
        ``modified``, with the content before and after)."""
    def diff(self, r: SandboxRef) -> DiffView:
        """The sandbox's changes."""
    def commit(self, r: SandboxRef, message: Optional[str] = None) -> Optional[str]:
        """Commits the sandbox; returns what names the commit, if anything does."""
    def rollback(self, r: SandboxRef, after_commit: bool = False) -> None:
        """Discards the changes, or undoes the commit when ``after_commit``."""
    def checkpoint(self, r: SandboxRef, checkpoint_id: str) -> None:
        """Records the sandbox's state as ``checkpoint_id``."""
    def restore_checkpoint(self, r: SandboxRef, checkpoint_id: str) -> None:
        """Makes the sandbox what it was at ``checkpoint_id``."""
    def cleanup(self, r: SandboxRef) -> None:
        """Removes the sandbox."""
    def is_rollbackable(self) -> bool:
        """Whether a commit of the strategy can be undone."""

@final
class SandboxManager:
    """Every sandbox of every plan of one engine, found again after a crash: a sandbox per
    ``(plan_id, resource_id)``, committed all or nothing by ``commit_all``.

    A context manager: leaving ``with`` closes it (see ``close``). Thread-safe; calls that
    touch the disk release the GIL. Failures raise ``SandboxError`` or a subclass.
    """
    def __init__(self, root: Optional[_Path] = None, custom_registry: Optional[StrategyRegistry] = None) -> None:
        """Opens the manager of ``root`` (default: ``$PATCHBOX_ROOT``, else
        ``$HOME/.entropic/sandbox``; plan sandboxes live in ``<root>/plans``). Sandboxes on disk are
        loaded and an interrupted ``commit_all`` is rolled back. ``custom_registry`` holds the
        custom strategies sandboxes can be made of.
        """
    @property
    def root(self) -> str:
        """The root (canonical)."""
    def recovery(self) -> Tuple[List[Tuple[str, List[str]]], List[str]]:
        """What opening found: ``(plan_id, [sandbox ids])`` of interrupted commits rolled back,
        and warnings.
        """
    def recover(self, plan_id: str) -> Tuple[List[Tuple[str, List[str]]], List[str]]:
        """Waits for the plan's lock and settles what a process that died holding it left (an
        interrupted ``commit_all`` rolled back); returns ``recovery()`` afterwards.
        """
    def busy_plans(self) -> List[str]:
        """Plans whose lock another process held when this manager opened (a commit was running);
        ``recover(plan_id)`` settles one later.
        """
    def get_or_create_sandbox(self, plan_id: str, resource_id: str, original_path: _Path, sandbox_strategy: _Strategy) -> Sandbox:
        """The sandbox of ``(plan_id, resource_id)``, made and created on first use with
        ``sandbox_strategy`` over ``original_path``; later calls return the same object. Raises
        ``SandboxCreationError`` when it cannot be made, ``SandboxError`` for an invalid id or an
        unknown strategy.
        """
    def get_sandbox(self, plan_id: str, resource_id: str) -> Optional[Sandbox]:
        """The sandbox of ``(plan_id, resource_id)``, or ``None``."""
    def list_sandboxes(self, plan_id: str) -> List[Sandbox]:
        """Every sandbox of the plan, in creation order."""
    def list_plans(self) -> List[str]:
        """The ids of every plan with sandboxes."""
    def plan_records(self, plan_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The plans and their sandboxes as the records ``patchbox plan list --json [PLAN]``
        prints (see ``docs/json.md``): every plan, or only ``plan_id`` (a plan with no
        sandboxes gets a record with none)."""
    def diff_records(self, plan_id: str) -> List[Dict[str, Any]]:
        """The changes of the plan's created and active sandboxes as the records ``patchbox
        plan diff --json PLAN`` prints: ``plan``, ``sandbox_id``, ``resource_id``, ``files``
        (change kind and line counts) and ``patch`` (see ``docs/json.md``). Raises
        ``SandboxError`` when a sandbox's diff cannot be computed."""
    def commit_all(
        self,
        plan_id: str,
        *,
        command: Optional[Sequence[str]] = None,
        cwd: Optional[_Path] = None,
        exit_status: Optional[int] = None,
        started_ms: Optional[int] = None,
        ended_ms: Optional[int] = None,
    ) -> List[CommitResult]:
        """Commits every created or active sandbox of the plan, all or nothing; returns their
        results. A failure rolls the committed ones back (newest first); a sandbox-level one (a
        ``SandboxError``: a conflict, a refused lock, a custom strategy's ``SandboxCommitError``)
        then returns ``[CommitResult(success=False, error=...)]``, any other raises
        ``AtomicCommitError`` with ``rolled_back_ids`` and ``failed_rollback_ids``. The keyword
        arguments are what produced the work (its provenance); each result's ``metadata``
        carries them under ``provenance.command`` (a JSON array), ``provenance.cwd``,
        ``provenance.exit_status``, ``provenance.started_ms`` and ``provenance.ended_ms``.
        """
    def rollback_all(self, plan_id: str) -> None:
        """Rolls back every active and committed sandbox of the plan; raises the first error after
        trying them all.
        """
    def cleanup_all(self, plan_id: str) -> None:
        """Cleans up every sandbox of the plan and forgets them; raises the first error after
        trying them all.
        """
    def cleanup_abandoned(self) -> int:
        """Cleans up the sandboxes whose work is over (committed, rolled back, errored) and the
        remains of interrupted creations; returns how many were removed.
        """
    def prepare_snapshot(self, original: _Path) -> SnapshotInfo:
        """Takes a stable snapshot of ``original`` that every ``overlay`` sandbox created for it
        afterwards uses as its lower layer instead of copying the tree; returns it.
        """
    def snapshots(self) -> List[SnapshotInfo]:
        """Every ready shared snapshot under the root, oldest first."""
    def drop_snapshots(self, original: _Path) -> int:
        """Removes every shared snapshot of ``original`` that no sandbox uses; returns how many."""
    def get_or_create_sandbox_for_resource(self, plan_id: str, resource: Resource, resource_registry: ResourceRegistry) -> Sandbox:
        """The sandbox of the boundary ``resource`` belongs to (shared by every resource under
        that boundary: the same object). Its paths are relative to the boundary resource;
        ``resource_prefix`` says where ``resource`` is under it.
        """
    def resolve_sandbox_key(self, resource: Resource, resource_registry: ResourceRegistry) -> str:
        """The boundary key of ``resource``: the id of the resource whose sandbox it shares
        (cached until ``clear_boundary_cache``).
        """
    def resource_prefix(self, plan_id: str, resource: Resource, resource_registry: ResourceRegistry) -> str:
        """Where ``resource`` lies under its boundary (``""`` for the boundary itself): join it to
        the paths given to the shared sandbox's ``get_path``.
        """
    def clear_boundary_cache(self) -> None:
        """Drops the boundary cache (call when the resource registry changes)."""
    def has_custom_strategy(self, name: str) -> bool:
        """Whether a custom strategy is registered under ``name``."""
    def reopen_custom(self) -> List[str]:
        """Reopens the custom sandboxes on disk whose strategy is now registered (call after
        registering one); returns their ids.
        """
    def close(self) -> None:
        """Closes the manager now: sandboxes holding no uncommitted work are cleaned up; an active
        one with changes stays on disk for the next manager. Idempotent.
        """
    def __enter__(self) -> SandboxManager:
        """Returns the manager."""
    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> Literal[False]:
        """Closes the manager (see ``close``); exceptions propagate."""

class CheckpointManager:
    """Checkpoints of the sandboxes under one root, stored as what changed against each
    sandbox's base. A context manager: leaving ``with`` closes it (see ``close``).
    """
    def __init__(self, root: Union[None, _Path, SandboxManager] = None, *, store: Optional[str] = None) -> None:
        """The checkpoints of the sandboxes under ``root``: a ``SandboxManager`` (its root) or a
        directory; without one, a folder of the manager's own under the system temp folder
        (removed with its checkpoints by ``close``). With ``store`` (``s3://bucket/prefix``, or a
        directory) file checkpoints are written there too, for ``restore_from_store`` on another
        machine; a manager with a store and no ``root`` keeps its local copies under the default
        root (``$PATCHBOX_ROOT``, else ``$HOME/.entropic/sandbox``).
        """
    @property
    def storage_dir(self) -> str:
        """Where the checkpoints are stored (the root's ``plans`` folder, or the temp folder)."""
    def cleanup(self) -> int:
        """Removes every checkpoint this manager made (with their folders under the temp
        folder); returns how many.
        """
    def list_stored(self) -> List[SandboxCheckpoint]:
        """The checkpoints in the object store, of every plan and sandbox, oldest first
        (``SandboxError`` without a store)."""
    def restore_from_store(self, sandbox: Sandbox, checkpoint_id: str) -> Optional[SandboxCheckpoint]:
        """Makes ``sandbox`` (of a copy of the same project state, on any machine) what the stored
        checkpoint recorded; returns it, now kept locally too, or ``None`` when the store lacks it.
        """
    def prune_store(self, grace_seconds: float = 3600.0) -> int:
        """Removes the store's objects no stored checkpoint refers to and older than
        ``grace_seconds``; returns how many went."""
    def create_checkpoint(self, sandbox: Sandbox, plan_id: str, phase: str, metadata: Optional[Dict[str, str]] = None) -> SandboxCheckpoint:
        """Records the state of ``sandbox`` now, at ``phase``, with ``metadata``; returns the
        checkpoint. A ``none`` sandbox cannot be checkpointed, and a ``plan_id`` that is not the
        sandbox's plan is refused (``SandboxError``).
        """
    def rollback_to(self, checkpoint: SandboxCheckpoint) -> bool:
        """Makes the checkpoint's sandbox exactly what it was then; ``False`` when the checkpoint
        no longer exists. On a committed sandbox it raises ``SandboxStateError`` and changes
        nothing: undo the commit first (``sandbox.rollback()``).
        """
    def materialize(self, checkpoint: SandboxCheckpoint, dest: _Path) -> bool:
        """Writes into ``dest`` (a directory that must not exist yet) the whole tree the sandbox
        had at ``checkpoint`` — a full-copy snapshot, made on demand — leaving the sandbox as it
        is; ``False`` when the checkpoint no longer exists. Only ``copy_on_write`` and ``overlay``
        checkpoints have a tree (others raise ``SandboxError``).
        """
    def list_checkpoints(self, sandbox_id: str) -> List[SandboxCheckpoint]:
        """The checkpoints of a sandbox this manager knows, oldest first."""
    def delete_checkpoint(self, checkpoint_id: str) -> bool:
        """Removes a checkpoint; ``False`` when it was not there."""
    def attach(self, sandbox: Sandbox) -> None:
        """Makes the manager know ``sandbox`` (its checkpoints on disk then list)."""
    def keep(self) -> None:
        """Keeps the checkpoints on disk when the manager is closed."""
    def disk_bytes(self, sandbox_id: str) -> int:
        """Bytes the checkpoints of a sandbox take on disk."""
    def close(self) -> None:
        """Closes the manager: the checkpoints it made are removed unless ``keep()`` was called."""
    def __enter__(self) -> CheckpointManager:
        """Returns the manager."""
    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> Literal[False]:
        """Closes the manager (see ``close``); exceptions propagate."""

_T = TypeVar("_T")

@final
class PhaseRunner:
    """Runs the Execute and Apply phases of a manager's plans with checkpoint hooks."""
    def __init__(self, manager: SandboxManager, checkpoint_manager: Optional[CheckpointManager] = None) -> None:
        """A runner over ``manager``'s plans; without ``checkpoint_manager`` the hooks are skipped."""
    def execute(self, plan_id: str, phase: Callable[[], _T]) -> _T:
        """Runs ``phase()`` as the Execute phase of ``plan_id`` between ``pre_execute`` and
        ``post_execute`` checkpoints; returns what it returned. When it raises, every sandbox goes
        back to ``pre_execute`` and the exception propagates (with ``restored``).
        """
    def apply(self, plan_id: str) -> List[CommitResult]:
        """Runs the Apply phase of ``plan_id``: ``pre_apply`` checkpoints, then ``commit_all``;
        returns the results. On failure every sandbox goes back to ``pre_apply`` and the commit's
        error is raised (with ``phase``, ``restored`` and ``rollback_failures``).
        """

#: The nine operations of the custom-strategy protocol, in order.
STRATEGY_OPERATIONS: List[str]

# ---------------------------------------------------------------- (end of plan layer)




# ---------------------------------------------------------------- session layer (session.rs, apply.rs)

import os
import pathlib
import subprocess
from typing import Callable, ClassVar, Mapping, Sequence, Tuple, Union

_Patch = Union[bytes, bytearray, str]

class SandboxInfo:
    """A delegation's sandbox: the directory the sub-agent works in."""
    def __init__(self, path: _Path, delegation_id: str, base_dir: _Path) -> None:
        """Rebuilds a handle from its three fields (an engine may keep them and come back)."""
    @property
    def path(self) -> pathlib.Path:
        """The sandbox directory ``<session>/d-<id>``."""
    @property
    def delegation_id(self) -> str:
        """The delegation id."""
    @property
    def base_dir(self) -> pathlib.Path:
        """The session's base snapshot the patch is computed against."""
    @property
    def mode(self) -> str:
        """How the sandbox is isolated: ``"copy"``, ``"kernel-overlay"`` or ``"fuse-overlay"``."""
    def __eq__(self, other: object) -> bool:
        """Handles are equal when they name the same sandbox (path, id, base)."""

class SandboxResult:
    """What a delegation changed; relative paths are str, as git prints them."""
    @property
    def patch(self) -> bytes:
        """The git-style patch, empty when nothing changed."""
    @property
    def patch_text(self) -> str:
        """The patch as text (U+FFFD where a file's content is not UTF-8)."""
    @property
    def files_touched(self) -> List[str]:
        """Every path the patch touches, relative to the project, sorted."""
    @property
    def added(self) -> List[str]:
        """Paths the delegation added."""
    @property
    def modified(self) -> List[str]:
        """Paths whose content, mode or type changed."""
    @property
    def deleted(self) -> List[str]:
        """Paths the delegation deleted."""
    @property
    def ignored(self) -> List[str]:
        """New paths matching the project's ignore rules (not in the patch)."""
    @property
    def base_dir(self) -> pathlib.Path:
        """The base snapshot directory."""
    @property
    def head_dir(self) -> pathlib.Path:
        """The sandbox directory."""

class Decision:
    """The consumer's answer when a delegation completes: ``ACCEPT`` takes the patch (the
    consumer applies it), ``REJECT`` sends it to the pending store.
    """
    ACCEPT: ClassVar[Decision]
    REJECT: ClassVar[Decision]

class Routed:
    """Where a completed delegation's work went: ``ACCEPTED`` (in the completion's result),
    ``PENDING`` (in the pending store), ``UNCHANGED`` (nothing changed, nothing routed).
    """
    ACCEPTED: ClassVar[Routed]
    PENDING: ClassVar[Routed]
    UNCHANGED: ClassVar[Routed]

class Completion:
    """The outcome of ``SessionManager.complete_sandbox``."""
    @property
    def result(self) -> SandboxResult:
        """What the delegation changed."""
    @property
    def routed(self) -> Routed:
        """Where it went."""
    @property
    def pending_path(self) -> Optional[pathlib.Path]:
        """The pending patch file, when ``routed`` is ``Routed.PENDING``."""
    @property
    def decide_error(self) -> Optional[BaseException]:
        """The exception the decision callable raised (or the ``TypeError`` for an answer that is
        neither a ``Decision`` nor a ``bool``): the reason the work went pending.
        """

class PruneReport:
    """What a prune of dead sessions did."""
    pruned: List[str]
    """Dead sessions whose sandboxes were removed."""
    recovered: List[pathlib.Path]
    """Pending patches written from the work of dead sessions."""
    live: List[str]
    """Sessions left alone because they are alive."""
    errors: List[str]
    """Problems met; the affected sandboxes were left in place."""
    deferred: List[str]
    """Dead sessions left for a later prune."""
    shared_layers_removed: int
    """Shared lower layers removed."""

class SessionStatus:
    """A session found under a root (``list_sessions``)."""
    id: str
    """The session id."""
    live: bool
    """Whether its owner still holds its lock."""
    project: Optional[pathlib.Path]
    """The project it snapshots, if known."""
    sandboxes: List[str]
    """Its sandboxes (``d-*`` names)."""
    pending: int
    """How many pending patches it holds."""

class SessionManager:
    """One engine session (the Rust/C++ SandboxManager). Thread-safe; a context manager."""
    def __init__(
        self,
        project_dir: _Path,
        root: Optional[_Path] = None,
        *,
        prune_on_start: bool = True,
        confine: bool = True,
        writable_dirs: Sequence[_Path] = (),
        progress: Optional[Callable[[int, int, int], object]] = None,
        isolation: Optional[Literal["copy", "overlay", "auto"]] = None,
        git_repo: bool = True,
        store: Optional[str] = None,
    ) -> None:
        """Starts a session for ``project_dir`` under ``root`` (default: ``$PATCHBOX_ROOT``, else
        ``~/.entropic/sandbox``) and, unless ``prune_on_start`` is false, recovers dead sessions
        there on a background thread. ``isolation`` is ``"copy"``, ``"overlay"`` or ``"auto"``
        (default: ``$PATCHBOX_ISOLATION``, else ``"auto"``). ``store`` (``s3://bucket/prefix`` or a
        directory) is where ``deliver_pending_patch`` stores pending patches for other
        machines. Failures raise ``PatchboxError``.
        """
    def isolation_mode(self) -> Optional[str]:
        """What sandboxes are made as (``"copy"``, ``"kernel-overlay"``, ``"fuse-overlay"``) once
        the first create decided it; ``None`` before.
        """
    @property
    def project_dir(self) -> pathlib.Path:
        """The project directory (canonical)."""
    @property
    def session_base(self) -> pathlib.Path:
        """The session directory ``<root>/<session-id>`` (canonical)."""
    @property
    def session_id(self) -> str:
        """The session id (a ULID)."""
    @property
    def root(self) -> pathlib.Path:
        """The sandbox root (canonical)."""
    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
    def create_sandbox(self, delegation_id: str, chain_from: Optional[SandboxInfo] = None) -> SandboxInfo:
        """Creates the sandbox ``d-<delegation_id>``: a copy of the session snapshot (taken by the
        first call), or of ``chain_from``'s current state (its patch is then cumulative).
        """
    def finalize_sandbox(self, info: SandboxInfo) -> SandboxResult:
        """What the delegation changed, as a patch against the session snapshot; the sandbox is
        kept.
        """
    def discard_sandbox(self, info: SandboxInfo) -> None:
        """Removes a sandbox. Idempotent; a path that is not a sandbox of this session is refused
        (``PatchboxError``, ``kind == "containment"``) and nothing is removed.
        """
    def deliver_pending_patch(
        self,
        delegation_id: str,
        patch: _Patch,
        *,
        command: Optional[Sequence[str]] = None,
        cwd: Optional[_Path] = None,
        exit_status: Optional[int] = None,
        started_ms: Optional[int] = None,
        ended_ms: Optional[int] = None,
    ) -> PendingDelivery:
        """Stores ``patch`` as a pending patch of ``delegation_id`` in the session's ``store``
        (with the base versions of the files it touched), or locally without one; a store that
        fails keeps it locally (``place == "kept"``). The keyword arguments are its provenance,
        as for ``write_pending_patch``: kept in the store's record, shown by ``patchbox pending
        show --store URL`` and ``stored_record()``.
        """
    def write_pending_patch(
        self,
        delegation_id: str,
        patch: _Patch,
        *,
        command: Optional[Sequence[str]] = None,
        cwd: Optional[_Path] = None,
        exit_status: Optional[int] = None,
        started_ms: Optional[int] = None,
        ended_ms: Optional[int] = None,
    ) -> pathlib.Path:
        """Stores ``patch`` as a pending patch of ``delegation_id`` and returns the patch file.
        Never overwrites: a second one of the same id is ``<id>.2.patch``, ... The keyword
        arguments are its provenance (the command and its arguments, its directory, exit status,
        start and end times in milliseconds since the epoch), shown by ``patchbox pending show``
        and in ``pending_records()``.
        """
    def complete_sandbox(
        self,
        info: SandboxInfo,
        decide: Optional[Callable[[SandboxResult], Union[Decision, bool]]] = None,
    ) -> Completion:
        """Finalizes the sandbox, asks ``decide(result)`` whether to accept the patch, then discards
        the sandbox. Reject, no ``decide``, or a ``decide`` that raises send the patch to the
        pending store. If storing it fails, the sandbox is kept and the error raised.
        """
    def run(
        self,
        info: SandboxInfo,
        args: Sequence[_Path],
        *,
        env: Optional[Mapping[str, str]] = None,
        input: Optional[bytes] = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Runs ``args`` in the sandbox and waits for it (working directory the sandbox, confined
        unless the manager was made with ``confine=False``); returns a
        ``subprocess.CompletedProcess`` with the output captured.
        """
    def skipped(self) -> List[Tuple[str, str]]:
        """Entries the snapshot skipped (FIFOs, sockets, nested repositories...) with reasons."""
    def symlinks_into_project(self) -> List[str]:
        """Absolute symlinks of the snapshot that resolve into the project."""
    def confinement(self) -> str:
        """Whether tools run by the library are confined: ``"enforced"``, ``"off"``, or
        ``"unavailable: <reason>"``.
        """
    def startup_recovery(self) -> Optional[PruneReport]:
        """What the recovery of dead sessions started with the manager did (waiting for it);
        ``None`` when ``prune_on_start`` was false.
        """
    def close(self) -> None:
        """Ends the session: open sandboxes are stored as abandoned pending patches, the snapshot
        and sandboxes removed, pending patches kept. Idempotent; later calls raise
        ``PatchboxError`` (kind ``"closed"``).
        """
    def __enter__(self) -> SessionManager:
        """Returns the manager."""
    def __exit__(self, *exc: object) -> None:
        """Closes the manager (see ``close``)."""

def list_sessions(root: Optional[_Path] = None) -> List[SessionStatus]:
    """The sessions under ``root``, oldest first, and whether each is alive."""
def prune_sessions(root: Optional[_Path] = None) -> PruneReport:
    """Recovers every dead session under ``root`` into pending patches and removes its
    sandboxes; live sessions are left alone.
    """

class FileStatus:
    """What happened (or, in check mode, would happen) to one file: ``APPLIED``, ``MERGED``
    (3-way), ``ALREADY_APPLIED``, ``CONFLICT``, ``REFUSED``.
    """
    APPLIED: ClassVar[FileStatus]
    MERGED: ClassVar[FileStatus]
    ALREADY_APPLIED: ClassVar[FileStatus]
    CONFLICT: ClassVar[FileStatus]
    REFUSED: ClassVar[FileStatus]

class Outcome:
    """The overall result of an apply: ``APPLIED``, ``APPLIED_WITH_CONFLICTS`` (markers
    written), ``ALREADY_APPLIED`` (nothing written), ``REFUSED`` (nothing written).
    """
    APPLIED: ClassVar[Outcome]
    APPLIED_WITH_CONFLICTS: ClassVar[Outcome]
    ALREADY_APPLIED: ClassVar[Outcome]
    REFUSED: ClassVar[Outcome]

class HunkConflict:
    """One hunk that could not be applied."""
    hunk: int
    """1-based index of the hunk within its file patch."""
    header: str
    """The hunk header, ``@@ -a,b +c,d @@``."""
    reason: str
    """Why it conflicts."""

class FileReport:
    """The result for one file patch."""
    @property
    def path(self) -> str:
        """The file, relative to the project (its new path; the old one for a deletion)."""
    @property
    def old_path(self) -> Optional[str]:
        """The source path of a rename or copy."""
    @property
    def status(self) -> FileStatus:
        """What happened."""
    @property
    def detail(self) -> str:
        """Offsets used, merge notes, the reason for a refusal."""
    @property
    def conflicts(self) -> List[HunkConflict]:
        """For ``FileStatus.CONFLICT``: the conflicting hunks."""
    @property
    def markers_written(self) -> bool:
        """True when the file was (would be) written with conflict markers."""

class RecoveryReport:
    """What the recovery run before an apply or undo found: interrupted transactions rolled
    forward or back.
    """
    @property
    def recovered(self) -> List[Tuple[str, str]]:
        """``(staging directory name, action)`` per interrupted transaction, action one of
        ``"rolled_back"``, ``"rolled_forward"``, ``"cleaned_up"``.
        """
    @property
    def warnings(self) -> List[str]:
        """Non-fatal notes."""
    def is_empty(self) -> bool:
        """True when there was nothing to recover."""

class ApplyReport:
    """The result of an apply: one ``FileReport`` per file patch, in patch order."""
    @property
    def files(self) -> List[FileReport]:
        """Per file patch, in order."""
    @property
    def outcome(self) -> Outcome:
        """The overall outcome."""
    @property
    def check_only(self) -> bool:
        """True when made in check mode: nothing was written."""
    @property
    def undo_dir(self) -> Optional[pathlib.Path]:
        """The undo record written, if any."""
    @property
    def warnings(self) -> List[str]:
        """Non-fatal notes."""
    @property
    def recovery(self) -> RecoveryReport:
        """What the recovery run before the apply found."""
    def is_ok(self) -> bool:
        """True unless the patch was refused."""
    def wrote(self) -> bool:
        """True when this call modified the project."""
    def to_json(self) -> str:
        """The report as the JSON record ``patchbox apply --json`` prints."""
    def count(self, status: FileStatus) -> int:
        """How many files have ``status``."""

class UndoReport:
    """The result of an undo."""
    @property
    def restored(self) -> List[str]:
        """Paths restored to their state before the apply."""
    @property
    def overwritten(self) -> List[str]:
        """Paths changed since the apply and overwritten anyway (``force=True``)."""
    @property
    def already_undone(self) -> bool:
        """The record had already been used; nothing was done."""
    @property
    def warnings(self) -> List[str]:
        """Non-fatal notes."""
    @property
    def recovery(self) -> RecoveryReport:
        """What the recovery run before the undo found."""

def apply_patch(
    project: _Path,
    patch: _Patch,
    *,
    check: bool = False,
    preimages: Optional[_Path] = None,
    conflict_markers: bool = False,
    undo_dir: Optional[_Path] = None,
    strip: int = 1,
    allow_outside_symlinks: bool = False,
) -> ApplyReport:
    """Applies ``patch`` (``git diff [--binary]``, this library's, or ``diff -u``) to ``project``
    atomically and returns the report. ``check``: plan only, write nothing. ``preimages``: the
    original files, for a 3-way merge when the project drifted. ``conflict_markers``: write
    overlapping edits with markers instead of refusing. ``undo_dir``: record what is replaced,
    for ``undo_apply``. ``strip``: leading path components to drop (``-p``). A conflict or a
    refusal is in the report; a malformed patch or an I/O failure raises ``PatchboxError``.
    """
def undo_apply(project: _Path, undo_dir: _Path, *, force: bool = False) -> UndoReport:
    """Restores ``project`` to its state before the apply recorded in ``undo_dir``. Refused
    (``PatchboxError``, ``kind == "apply_failed"``, naming the files) when files changed since,
    unless ``force``.
    """
def recover_project(project: _Path) -> RecoveryReport:
    """Finishes or rolls back every apply or undo interrupted in ``project`` (a crash)."""

class UndoRecord:
    """One undo record in an ``UndoStore``."""
    id: str
    """Its id (a ULID)."""
    dir: pathlib.Path
    """Its directory."""
    project: pathlib.Path
    """The project it was made for."""
    created: float
    """When the apply started, seconds since the Unix epoch."""
    paths: int
    """How many paths the apply changed."""
    state: str
    """``"applied"`` (can be undone), ``"undone"`` or ``"incomplete"``."""

class UndoStore:
    """The undo records under ``<root>/undo/``: applies made through it can be undone later,
    the newest first (it keeps the newest 50 per project, none older than 30 days).
    """
    def __init__(self, root: Optional[_Path] = None) -> None:
        """The store of the sandbox root ``root`` (default: the library's default root)."""
    @property
    def dir(self) -> pathlib.Path:
        """The directory holding the records."""
    def apply(
        self,
        project: _Path,
        patch: _Patch,
        *,
        check: bool = False,
        preimages: Optional[_Path] = None,
        conflict_markers: bool = False,
        strip: int = 1,
        allow_outside_symlinks: bool = False,
    ) -> ApplyReport:
        """``apply_patch`` with an undo record in the store (then prunes the store)."""
    def list(self, project: Optional[_Path] = None) -> List[UndoRecord]:
        """Every record (of ``project``, if given), oldest first."""
    def undo_last(self, project: _Path, *, force: bool = False) -> Tuple[UndoRecord, UndoReport]:
        """Undoes the newest applied record of ``project``, then drops it; returns
        ``(record, report)``. Raises ``PatchboxError`` (kind ``"pending"``) when there is nothing
        to undo.
        """
    def undo(self, project: _Path, id: str, *, force: bool = False) -> UndoReport:
        """Undoes the record ``id`` on ``project``, then drops it."""
    def drop(self, id: str) -> None:
        """Removes the record ``id``."""
    def prune(self) -> List[str]:
        """Prunes the store by its policy; returns the ids removed."""

class PendingPatch:
    """One pending patch found on disk."""
    id: str
    """``<session-id>/<delegation-id>``, unique under a root."""
    session: str
    """The session that produced it."""
    delegation: str
    """The delegation (its pending name: ``<id>``, ``<id>.2``, ...)."""
    patch_path: pathlib.Path
    """The patch file."""
    preimages: Optional[pathlib.Path]
    """The base versions of the files it touches (for a 3-way apply), if stored."""
    project: pathlib.Path
    """The project it applies to."""
    created: int
    """When it was stored, seconds since the Unix epoch."""
    recovered: bool
    """Recovered from a session that died before finishing."""
    abandoned: bool
    """Its manager ended with the sandbox neither completed nor discarded."""

def list_pending(root: Optional[_Path] = None) -> List[PendingPatch]:
    """Every pending patch under ``root``, oldest session first."""
def read_pending(id: str, *, root: Optional[_Path] = None) -> bytes:
    """The bytes of the pending patch ``id``; an unknown id raises ``PatchboxError`` (kind
    ``"pending"``).
    """
def apply_pending(
    id: str,
    project: Optional[_Path] = None,
    *,
    root: Optional[_Path] = None,
    check: bool = False,
    preimages: Optional[_Path] = None,
    conflict_markers: bool = False,
    strip: int = 1,
    allow_outside_symlinks: bool = False,
) -> ApplyReport:
    """Applies the pending patch ``id`` to its project (or ``project``), merging 3-way against
    the pre-images stored with it, with an undo record; returns the report. Applied for real
    (not ``check``), it leaves the pending store; a conflict keeps it pending.
    """
def drop_pending(id: str, *, root: Optional[_Path] = None) -> None:
    """Removes the pending patch ``id`` (its meta and pre-images too)."""

@final
class StoredPatch:
    """One pending patch in an object store (``s3://bucket/prefix``, or a directory of the
    same layout), shared by every machine that holds the URL."""
    id: str
    """``<session-id>/<name>``, unique in the store."""
    session: str
    """The session that produced it."""
    delegation: str
    """The delegation that produced it."""
    name: str
    """Its name in the session (``<id>``, ``<id>.2``, ...)."""
    host: str
    """The machine that stored it."""
    project: pathlib.Path
    """The project it was made from, on that machine."""
    created: int
    """When it was stored, seconds since the Unix epoch."""
    recovered: bool
    """Recovered from a session that died before finishing."""
    abandoned: bool
    """Its manager ended with the sandbox neither completed nor discarded."""
    files: int
    """Files it touches."""
    patch_bytes: int
    """Size of the patch in bytes."""

@final
class PendingDelivery:
    """Where ``SessionManager.deliver_pending_patch`` put a pending patch."""
    place: Literal["local", "stored", "kept"]
    """``"local"`` (no store), ``"stored"`` (in the object store), ``"kept"`` (the store
    failed: kept in the local pending store until ``push_pending``)."""
    path: Optional[pathlib.Path]
    """The local patch file (``"local"``, ``"kept"``)."""
    id: Optional[str]
    """Its id in the object store (``"stored"``)."""
    url: Optional[str]
    """The object store's URL (``"stored"``)."""
    error: Optional[str]
    """Why the store failed (``"kept"``)."""

def list_stored(store: str) -> List[StoredPatch]:
    """Every pending patch in the object store ``store``; endpoint and credentials come from
    the AWS variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...). A store that fails
    raises ``PatchboxError`` (kind ``"store"``).
    """
def read_stored(id: str, *, store: str) -> bytes:
    """The bytes of the stored pending patch ``id`` (``PatchboxError`` kind ``"pending"`` when
    unknown).
    """
def apply_stored(
    id: str,
    project: _Path,
    *,
    store: str,
    root: Optional[_Path] = None,
    check: bool = False,
    conflict_markers: bool = False,
) -> ApplyReport:
    """Applies the stored pending patch ``id`` onto ``project`` (your own copy), merging 3-way
    against its stored pre-images, with an undo record under ``root``. Applied for real (not
    ``check``), it leaves the store; a conflict keeps it.
    """
def drop_stored(id: str, *, store: str) -> None:
    """Removes the stored pending patch ``id``."""
def push_pending(
    store: str, *, root: Optional[_Path] = None
) -> Tuple[List[Tuple[str, str]], List[Tuple[str, str]]]:
    """Sends every local pending patch under ``root`` to ``store``, removing each locally once
    stored; returns ``(pushed, failed)``: (local id, id in the store) pairs, and (local id,
    error) pairs for those that stay local.
    """

class PartialApply:
    """What ``apply_pending_selected`` did."""
    @property
    def report(self) -> ApplyReport:
        """The apply of the chosen part."""
    @property
    def remaining(self) -> Optional[str]:
        """The new pending patch holding the rest; ``None`` when nothing is left or nothing
        was applied (check mode, a refusal: the pending patch stays as it was)."""
    def to_json(self) -> str:
        """The report as JSON, with ``pending_id`` and ``remaining`` (what
        ``patchbox pending apply --json`` prints)."""

def apply_pending_selected(
    id: str,
    project: Optional[_Path] = None,
    *,
    root: Optional[_Path] = None,
    only: Sequence[str] = (),
    exclude: Sequence[str] = (),
    hunks: Sequence[str] = (),
    check: bool = False,
    conflict_markers: bool = False,
) -> PartialApply:
    """Applies the part of pending patch ``id`` that ``only`` (paths: a file, or a
    directory's files), ``exclude`` and ``hunks`` (``"PATH:1,3"``, ``"PATH:2-4"``, counted from
    1) choose, atomically and 3-way against its stored pre-images, with an undo record; the rest
    stays pending as a new entry with its own pre-images. A selection that cannot be made raises
    ``PatchboxError`` (kind ``"pending"``) and writes nothing.
    """
def commit_record_json(result: CommitResult) -> str:
    """The JSON text of ``result``'s record (``CommitResult.to_record()`` parses it)."""
def pending_records_json(root: Optional[_Path] = None) -> str:
    """Every pending patch's record as the JSON array ``patchbox pending list --json``
    prints."""
def pending_record_json(id: str, *, root: Optional[_Path] = None) -> str:
    """One pending patch's record, its patch text included, as ``pending show --json``
    prints it."""
def stored_record_json(id: str, *, store: str) -> str:
    """One pending patch's record in the object store ``store``, its patch text included, as
    ``pending show --json --store URL`` prints it."""
def sessions_json(root: Optional[_Path] = None) -> str:
    """The sessions under ``root`` as the JSON array ``patchbox sessions --json`` prints."""


# ---------------------------------------------------------------- (end of session layer)
