"""The exceptions of patchbox, named as the plan-executor engines name theirs.

::

    PatchboxError(Exception)          every patchbox error (sessions, apply, pending; .kind)
    └── SandboxError                  a plan-sandbox failure (.sandbox_id)
        ├── SandboxCreationError      a sandbox could not be made (.resource_id)
        ├── SandboxCommitError        a commit was refused or failed (.files)
        ├── SandboxRollbackError      a rollback was refused or failed (.files)
        ├── SandboxStateError         an operation not valid in the status (.from_status, .to_status)
        ├── AtomicCommitError         commit_all failed (.plan_id, .rolled_back_ids, .failed_rollback_ids)
        └── ProtocolMismatchError     a custom strategy lacks an operation of the protocol

The compiled core raises these very classes (``patchbox._native`` imports them from here), so
``except patchbox.SandboxError`` catches every plan-sandbox failure, tracebacks show the names
above, and every instance pickles — with its message and its attributes — through
``multiprocessing`` and ``concurrent.futures``.

Every instance carries ``kind`` (the Rust variant's stable name: ``"io"``, ``"commit"``,
``"state"``, …; each class has a default for instances made in Python). An error of a phase
run by ``PhaseRunner`` also carries ``phase``, ``restored`` (the sandboxes put back to their
checkpoint) and ``rollback_failures`` (``(sandbox_id, reason)`` pairs).
"""

from __future__ import annotations

from typing import ClassVar, Iterable, List, Optional

__all__ = [
    "PatchboxError",
    "SandboxError",
    "SandboxCreationError",
    "SandboxCommitError",
    "SandboxRollbackError",
    "SandboxStateError",
    "AtomicCommitError",
    "ProtocolMismatchError",
]


class PatchboxError(Exception):
    """Base of every patchbox error; ``kind`` names what went wrong (``"io"``, ``"git"``,
    ``"pending"``, ``"closed"``, …) and the message names the path of any I/O failure.

    Attributes live in the instance's ``__dict__``, which ``BaseException.__reduce__`` pickles
    beside ``args``: an unpickled error has the same type, message and attributes.
    """

    #: The kind of an instance made without one.
    _default_kind: ClassVar[str] = "error"

    kind: str

    def __init__(self, *args: object, kind: Optional[str] = None) -> None:
        super().__init__(*args)
        self.kind = self._default_kind if kind is None else kind


class SandboxError(PatchboxError):
    """A plan-sandbox failure; ``sandbox_id`` names the sandbox when one is known."""

    _default_kind = "sandbox"

    sandbox_id: Optional[str]

    def __init__(self, *args: object, kind: Optional[str] = None, sandbox_id: Optional[str] = None) -> None:
        super().__init__(*args, kind=kind)
        self.sandbox_id = sandbox_id


class SandboxCreationError(SandboxError):
    """A sandbox could not be made (``resource_id`` names the resource); nothing of it is
    left on disk."""

    _default_kind = "creation"

    resource_id: str

    def __init__(
        self,
        *args: object,
        kind: Optional[str] = None,
        sandbox_id: Optional[str] = None,
        resource_id: str = "",
    ) -> None:
        super().__init__(*args, kind=kind, sandbox_id=sandbox_id)
        self.resource_id = resource_id


class SandboxCommitError(SandboxError):
    """A commit was refused or failed (``files`` names the conflicting or failed files); the
    original is as it was."""

    _default_kind = "commit"

    files: List[str]

    def __init__(
        self,
        *args: object,
        kind: Optional[str] = None,
        sandbox_id: Optional[str] = None,
        files: Iterable[str] = (),
    ) -> None:
        super().__init__(*args, kind=kind, sandbox_id=sandbox_id)
        self.files = list(files)


class SandboxRollbackError(SandboxError):
    """A rollback was refused or failed (``files`` names the files it could not restore)."""

    _default_kind = "rollback"

    files: List[str]

    def __init__(
        self,
        *args: object,
        kind: Optional[str] = None,
        sandbox_id: Optional[str] = None,
        files: Iterable[str] = (),
    ) -> None:
        super().__init__(*args, kind=kind, sandbox_id=sandbox_id)
        self.files = list(files)


class SandboxStateError(SandboxError):
    """An operation not valid in the sandbox's status: ``from_status`` is the status it is
    in, ``to_status`` the one the operation would move it to (``SandboxStatus`` values)."""

    _default_kind = "state"

    from_status: str
    to_status: str

    def __init__(
        self,
        *args: object,
        kind: Optional[str] = None,
        sandbox_id: Optional[str] = None,
        from_status: str = "",
        to_status: str = "",
    ) -> None:
        super().__init__(*args, kind=kind, sandbox_id=sandbox_id)
        self.from_status = from_status
        self.to_status = to_status


class AtomicCommitError(SandboxError):
    """``commit_all`` of ``plan_id`` failed: the sandboxes it had committed were rolled back
    newest first (``rolled_back_ids``), except those whose rollback failed
    (``failed_rollback_ids``); ``sandbox_id`` is the one whose commit failed."""

    _default_kind = "atomic_commit"

    plan_id: str
    rolled_back_ids: List[str]
    failed_rollback_ids: List[str]

    def __init__(
        self,
        *args: object,
        kind: Optional[str] = None,
        sandbox_id: Optional[str] = None,
        plan_id: str = "",
        rolled_back_ids: Iterable[str] = (),
        failed_rollback_ids: Iterable[str] = (),
    ) -> None:
        super().__init__(*args, kind=kind, sandbox_id=sandbox_id)
        self.plan_id = plan_id
        self.rolled_back_ids = list(rolled_back_ids)
        self.failed_rollback_ids = list(failed_rollback_ids)


class ProtocolMismatchError(SandboxError):
    """A custom strategy does not implement the strategy protocol; the message names the
    missing operations."""

    _default_kind = "protocol_mismatch"
