"""The plan layer's records as the plan executors' documentation defines them: frozen
dataclasses (``SandboxContext``, ``CommitResult``, ``SandboxRef``) and the frozen model
``SandboxCheckpoint``.

Why plain Python: the documentation makes them dataclasses, so ``dataclasses.asdict``,
``dataclasses.replace`` and ``FrozenInstanceError`` work on them, and metadata is kept as
given (``{"attempt": 3}`` stays an ``int``). The compiled core builds its results with these
very classes (it imports them from here). This module imports nothing of patchbox, so the
core can import it at any time.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Type, TypeVar

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


_M = TypeVar("_M", bound="SandboxCheckpoint")


@dataclass(frozen=True)
class SandboxCheckpoint:
    """A point-in-time state of a sandbox, as ``CheckpointManager.create_checkpoint`` took it.

    A frozen model with the Pydantic surface the documentation implies — ``model_dump()``,
    ``model_dump_json()``, ``model_validate()``, ``model_validate_json()``, ``model_copy()``
    and ``model_fields`` — without depending on Pydantic. ``rollback_to`` needs only
    ``checkpoint_id`` and ``sandbox_id``, so a checkpoint read back with ``model_validate``
    rolls back like the original.

    ``snapshot_path`` is the checkpoint's manifest: a checkpoint records what changed against
    the sandbox's base, not a full copy of it.
    """

    checkpoint_id: str
    sandbox_id: str
    plan_id: str
    phase: str
    created_at: datetime = field(default_factory=_now)
    metadata: Dict[str, str] = field(default_factory=dict)
    snapshot_path: str = ""

    #: Field name → its type's name, in declaration order (Pydantic's ``model_fields`` keys).
    model_fields: ClassVar[Dict[str, str]] = {
        "checkpoint_id": "str",
        "sandbox_id": "str",
        "plan_id": "str",
        "phase": "str",
        "created_at": "datetime",
        "metadata": "dict[str, str]",
        "snapshot_path": "str",
    }
    model_config: ClassVar[Mapping[str, object]] = {"frozen": True}

    def __post_init__(self) -> None:
        for name in ("checkpoint_id", "sandbox_id", "plan_id", "phase", "snapshot_path"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"SandboxCheckpoint.{name} must be a str, not {type(getattr(self, name)).__name__}")
        if not isinstance(self.created_at, datetime):
            raise ValueError("SandboxCheckpoint.created_at must be a datetime")
        meta = self.metadata
        if not isinstance(meta, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise ValueError("SandboxCheckpoint.metadata must be a dict[str, str]")
        object.__setattr__(self, "metadata", dict(meta))

    def model_dump(self, *, mode: str = "python") -> Dict[str, Any]:
        """The fields as a dict (``mode="json"``: ``created_at`` as an ISO 8601 string)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["metadata"] = dict(self.metadata)
        if mode == "json":
            out["created_at"] = self.created_at.isoformat()
        elif mode != "python":
            raise ValueError(f"mode must be 'python' or 'json', not {mode!r}")
        return out

    def model_dump_json(self, *, indent: Optional[int] = None) -> str:
        """The fields as JSON (``created_at`` in ISO 8601)."""
        return json.dumps(self.model_dump(mode="json"), indent=indent)

    @classmethod
    def model_validate(cls: Type[_M], obj: Any) -> _M:
        """A checkpoint from a dict (as ``model_dump`` gives, ``created_at`` a ``datetime`` or
        an ISO 8601 string) or from another checkpoint; ``ValueError`` names what is wrong."""
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, SandboxCheckpoint):
            obj = obj.model_dump()
        if not isinstance(obj, Mapping):
            raise ValueError(f"cannot validate a SandboxCheckpoint from {type(obj).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(obj) - set(names))
        if unknown:
            raise ValueError(f"SandboxCheckpoint: unknown fields {unknown}")
        missing = [n for n in ("checkpoint_id", "sandbox_id", "plan_id", "phase") if n not in obj]
        if missing:
            raise ValueError(f"SandboxCheckpoint: missing fields {missing}")
        data = dict(obj)
        created = data.get("created_at")
        if isinstance(created, str):
            data["created_at"] = datetime.fromisoformat(created)
        return cls(**data)

    @classmethod
    def model_validate_json(cls: Type[_M], text: str) -> _M:
        """``model_validate`` of a JSON document."""
        return cls.model_validate(json.loads(text))

    def model_copy(self: _M, *, update: Optional[Mapping[str, Any]] = None) -> _M:
        """A copy, with ``update``'s fields replaced (validated again)."""
        return type(self).model_validate({**self.model_dump(), **dict(update or {})})

