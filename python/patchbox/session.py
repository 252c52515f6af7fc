"""The session layer: an engine session's delegations, their patches, applying them.

What: ``SessionManager`` (one per engine session: ``create_sandbox``, ``finalize_sandbox``,
``discard_sandbox``, ``write_pending_patch``, ``complete_sandbox`` with a decision callable),
``ScopedSandbox`` (points an engine's tools at a sandbox for a ``with`` block), ``apply_patch``
and ``UndoStore`` (atomic, undoable applies), and the pending store (``list_pending``,
``read_pending``, ``apply_pending``, ``drop_pending``) — also in an object store shared by
many machines (``SessionManager(store=...)``, ``list_stored``, ``read_stored``,
``apply_stored``, ``drop_stored``, ``push_pending``).

Why: the same vocabulary as the Rust ``patchbox::session`` and the C++ ``patchbox::session``,
so a Python engine swaps its sandbox layer for this one. Each family is a module named for it:
``patchbox.session.Manager`` is this family's manager (``SessionManager``, the name it is
exported under at the top of the package), as ``patchbox.plan.Manager`` is the plan family's
(``SandboxManager``, the plan executors' documented name).

Invariants: the library never changes the process's working directory (``ScopedSandbox``
calls the engine's own swap function instead); the user's project is written only by an
explicit apply; a decision callable that raises means reject (the patch goes pending).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Callable, Optional, Type, Union

from ._native import (
    ApplyReport,
    Completion,
    Decision,
    FileReport,
    FileStatus,
    HunkConflict,
    Outcome,
    PendingDelivery,
    PendingPatch,
    PruneReport,
    RecoveryReport,
    Routed,
    SandboxInfo,
    SandboxResult,
    SessionManager,
    SessionStatus,
    StoredPatch,
    UndoRecord,
    UndoReport,
    UndoStore,
    apply_patch,
    apply_pending,
    apply_stored,
    drop_pending,
    drop_stored,
    list_pending,
    list_sessions,
    list_stored,
    prune_sessions,
    push_pending,
    read_pending,
    read_stored,
    recover_project,
    undo_apply,
)

__all__ = [
    "ApplyReport",
    "Completion",
    "Decision",
    "FileReport",
    "FileStatus",
    "HunkConflict",
    "Outcome",
    "PendingDelivery",
    "PendingPatch",
    "PruneReport",
    "RecoveryReport",
    "Routed",
    "SandboxInfo",
    "SandboxResult",
    "ScopedSandbox",
    "SessionManager",
    "SessionStatus",
    "StoredPatch",
    "UndoRecord",
    "UndoReport",
    "UndoStore",
    "apply_patch",
    "apply_pending",
    "apply_stored",
    "drop_pending",
    "drop_stored",
    "list_pending",
    "list_sessions",
    "list_stored",
    "prune_sessions",
    "push_pending",
    "read_pending",
    "read_stored",
    "recover_project",
    "undo_apply",
]

PathLike = Union[str, "os.PathLike[str]"]

#: The session family's manager under the family's module: ``patchbox.session.Manager`` is
#: ``SessionManager``. Kept out of ``__all__`` so ``from patchbox import *`` does not bind a
#: bare ``Manager`` that could mean either family.
Manager = SessionManager


class ScopedSandbox:
    """Points an engine's tools at a sandbox for a ``with`` block, and back.

    ``swap(sandbox_path)`` is called on entering the block and ``swap(original_path)`` on
    leaving it, also when the block raises (the block's exception then propagates). What
    ``swap`` raises on entering propagates and nothing is restored; what it raises on
    leaving propagates too, unless the block is already raising (its exception wins). With
    ``swap=None`` the guard does nothing. ``keep()`` leaves the tools in the sandbox.

    The Rust ``patchbox::ScopedSandbox`` and the C++ ``patchbox::ScopedSandbox`` behave the
    same way; as in C++, the guard is implemented in the host language (the swap function is
    the engine's own code).

    >>> class Tools:
    ...     cwd = "/project"
    >>> tools = Tools()
    >>> def swap(p: str) -> None:
    ...     tools.cwd = p
    >>> with ScopedSandbox(swap, "/sandbox/d-1", "/project"):
    ...     tools.cwd
    '/sandbox/d-1'
    >>> tools.cwd
    '/project'
    """

    def __init__(
        self,
        swap: Optional[Callable[[str], object]],
        sandbox_path: Union[PathLike, SandboxInfo],
        original_path: PathLike,
    ) -> None:
        if isinstance(sandbox_path, SandboxInfo):
            sandbox_path = sandbox_path.path
        self._swap = swap
        self._sandbox = os.fspath(sandbox_path)
        self._original = os.fspath(original_path)
        self._active = False

    @property
    def sandbox_path(self) -> str:
        """The sandbox path the tools point at inside the block."""
        return self._sandbox

    @property
    def original_path(self) -> str:
        """The path restored when the block ends."""
        return self._original

    def keep(self) -> None:
        """Leaves the tools pointing at the sandbox: leaving the block restores nothing."""
        self._active = False

    def __enter__(self) -> "ScopedSandbox":
        if self._swap is not None:
            self._swap(self._sandbox)
            self._active = True
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if not self._active or self._swap is None:
            return None
        self._active = False
        try:
            self._swap(self._original)
        except Exception:
            if exc is None:
                raise
            # The block's own exception is the one the caller needs to see.
        return None
