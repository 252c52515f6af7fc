"""The plan layer's records as the plan executors' documentation defines them: frozen
dataclasses (``SandboxContext``, ``CommitResult``, ``SandboxRef``) and the frozen Pydantic
model ``SandboxCheckpoint``.

Why plain Python: the documentation makes the first three dataclasses, so
``dataclasses.asdict``, ``dataclasses.replace`` and ``FrozenInstanceError`` work on them, and
metadata is kept as given (``{"attempt": 3}`` stays an ``int``); it makes the checkpoint a
``pydantic.BaseModel`` (Pydantic is a dependency of the package for it). The compiled core
builds its results with these very classes (it imports them from here). This module imports
nothing of patchbox, so the core can import it at any time (``CommitResult.to_record``
reaches the core only when called).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SandboxContext", "CommitResult", "SandboxRef", "SandboxCheckpoint"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class SandboxContext:
    """What a created sandbox is: where its files are (``sandbox_path``; for ``none`` the
    original itself) and what they stand for."""

    sandbox_id: str
    sandbox_path: str
    original_path: str
    resource_id: str
    plan_id: str
    created_at: datetime = field(default_factory=_now)
    metadata: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitResult:
    """The outcome of one ``commit()`` (or of ``commit_all``'s failed commit, with
    ``success`` false, ``error`` the reason and ``metadata["rolled_back_ids"]`` the sandboxes
    undone).

    ``commit_ref`` names the commit: the undo record (``copy_on_write``, ``overlay``), the git
    commit (``git_worktree``), the changeset (``transaction_rollback``); ``None`` for
    ``none``.
    """

    sandbox_id: str
    success: bool
    commit_ref: Optional[str] = None
    changed_files: List[str] = field(default_factory=list)
    added_files: List[str] = field(default_factory=list)
    deleted_files: List[str] = field(default_factory=list)
    error: Optional[str] = None
    timestamp: datetime = field(default_factory=_now)
    metadata: Dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> Dict[str, Any]:
        """The result as the JSON record ``patchbox plan commit --json`` prints one of per
        sandbox (see ``docs/json.md``): ``timestamp`` in milliseconds since the Unix epoch,
        ``metadata`` values as text (a failed result's ``rolled_back_ids`` comma-separated,
        as the library keeps them). Made by the library's own serializer, as the CLI's."""
        from ._native import commit_record_json  # late: the core imports this module

        record: Dict[str, Any] = json.loads(commit_record_json(self))
        return record


@dataclass(frozen=True)
class SandboxRef:
    """Which sandbox a custom strategy's operation is about: what its ``create`` returns and
    its other operations receive. ``metadata`` is kept as given (JSON values survive a
    restart of the engine: the library stores them as JSON)."""

    sandbox_id: str
    plan_id: str
    resource_id: str
    created_at: datetime = field(default_factory=_now)
    metadata: Dict[str, object] = field(default_factory=dict)


class SandboxCheckpoint(BaseModel):
    """A point-in-time state of a sandbox, as ``CheckpointManager.create_checkpoint`` took it.

    The documentation's frozen Pydantic model: a ``pydantic.BaseModel`` with
    ``model_config = ConfigDict(frozen=True)``, so ``model_dump()``, ``model_dump_json()``,
    ``model_validate()``, ``model_validate_json()`` and ``model_copy()`` are Pydantic's own,
    assigning a field raises ``pydantic.ValidationError``, and a checkpoint nests in a user's
    own Pydantic models. Unknown fields are refused (``extra="forbid"``), as is metadata that
    is not text. ``rollback_to`` needs only ``checkpoint_id`` and ``sandbox_id``, so a
    checkpoint read back with ``model_validate`` rolls back like the original.

    ``snapshot_path`` is the checkpoint's manifest: a checkpoint records what changed against
    the sandbox's base, not a full copy of it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: str
    sandbox_id: str
    plan_id: str
    phase: str
    created_at: datetime = Field(default_factory=_now)
    metadata: Dict[str, str] = Field(default_factory=dict)
    snapshot_path: str = ""
