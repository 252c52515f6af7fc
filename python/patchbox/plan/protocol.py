"""The sandbox protocol and its vocabulary, where the plan executors' documentation imports
them from (``cleveragents.infrastructure.sandbox.protocol`` there, ``patchbox.plan.protocol``
here): ``Sandbox``, ``SandboxStatus``, ``SandboxContext``, ``CommitResult`` and the
exceptions.

``Sandbox`` is a ``typing.runtime_checkable`` protocol: every sandbox a ``SandboxManager``
makes satisfies it (the strategy classes ``NoSandbox``, ``CopyOnWriteSandbox``,
``OverlaySandbox``, ``GitWorktreeSandbox``, ``TransactionSandbox``), and so does a user's own
class with the same members — ``isinstance(my_sandbox, Sandbox)`` holds for both.
"""

from __future__ import annotations

from typing import Optional, Protocol, runtime_checkable

from .._native import SandboxStatus
from ..errors import (
    AtomicCommitError,
    SandboxCommitError,
    SandboxCreationError,
    SandboxError,
    SandboxRollbackError,
    SandboxStateError,
)
from .._records import CommitResult, SandboxContext

__all__ = [
    "Sandbox",
    "SandboxStatus",
    "SandboxContext",
    "CommitResult",
    "SandboxError",
    "SandboxCreationError",
    "SandboxCommitError",
    "SandboxRollbackError",
    "SandboxStateError",
    "AtomicCommitError",
]


@runtime_checkable
class Sandbox(Protocol):
    """What every sandbox implements: the documented methods and properties.

    ``create(plan_id)`` makes the environment; ``get_path(resource_path)`` translates a
    resource-relative path to the sandbox copy; ``commit(message)`` brings the changes into
    the original; ``rollback()`` discards them (or undoes a commit); ``cleanup()`` removes
    every artefact (idempotent).
    """

    @property
    def sandbox_id(self) -> str:
        """Its unique ULID."""
        ...

    @property
    def status(self) -> SandboxStatus:
        """Its lifecycle status."""
        ...

    @property
    def context(self) -> Optional[SandboxContext]:
        """Its context after ``create()``; ``None`` before."""
        ...

    def create(self, plan_id: str) -> SandboxContext:
        """Initialises the sandbox environment."""
        ...

    def get_path(self, resource_path: str) -> str:
        """The absolute sandbox path of a resource-relative path."""
        ...

    def commit(self, message: Optional[str] = None) -> CommitResult:
        """Applies the changes to the original resource."""
        ...

    def rollback(self) -> None:
        """Discards all changes."""
        ...

    def cleanup(self) -> None:
        """Removes all sandbox artefacts (idempotent)."""
        ...
