"""Checked by mypy --strict in run-tests.sh: the stubs describe what the package exports."""

import patchbox


def describe(e: patchbox.AtomicCommitError) -> str:
    return ", ".join(e.rolled_back_ids + e.failed_rollback_ids)


# ---------------------------------------------------------------- plan layer

import datetime
from typing import Dict, List, Optional

from patchbox import (
    CheckpointManager,
    CommitResult,
    DiffEntry,
    DiffView,
    Resource,
    ResourceRegistry,
    Sandbox,
    SandboxCheckpoint,
    SandboxManager,
    SandboxRef,
    SandboxStatus,
    SandboxStrategy,
    SandboxStrategyRegistry,
)


class KvStrategy:
    """A custom strategy, checked against the protocol's shape."""

    def __init__(self) -> None:
        self.data: Dict[str, bytes] = {}

    def create(self, plan_id: str, resource: Resource) -> SandboxRef:
        return SandboxRef("kv", plan_id, resource.resource_id, metadata={"path": resource.path})

    def read(self, ref: SandboxRef, path: str) -> Optional[bytes]:
        return self.data.get(path)

    def write(self, ref: SandboxRef, path: str, content: bytes) -> DiffEntry:
        self.data[path] = content
        return DiffEntry(path, "added", None, content)

    def diff(self, ref: SandboxRef) -> DiffView:
        return DiffView(ref.sandbox_id, [DiffEntry(p, "added", None, d) for p, d in self.data.items()])

    def commit(self, ref: SandboxRef) -> None: ...
    def rollback(self, ref: SandboxRef) -> None: ...
    def checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None: ...
    def restore_checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None: ...
    def cleanup(self, ref: SandboxRef) -> None: ...


def plan_layer(root: str, project: str) -> List[CommitResult]:
    registry = SandboxStrategyRegistry(allowed_prefixes=("mycompany.",))
    registry.register_class("kv", KvStrategy)
    with SandboxManager(root, custom_registry=registry) as manager:
        sb: Sandbox = manager.get_or_create_sandbox("p", "docs", project, SandboxStrategy.COPY_ON_WRITE)
        with open(sb.get_path("notes.txt"), "w") as f:
            f.write("two\n")
        ok: bool = SandboxStatus.can_transition(sb.status, SandboxStatus.COMMITTED)
        created: Optional[datetime.datetime] = sb.context.created_at if sb.context else None
        cps = CheckpointManager(manager)
        cp: SandboxCheckpoint = cps.create_checkpoint(sb, "p", "pre_apply", {"why": "review"})
        restored: bool = cps.rollback_to(cp)
        patch: bytes = sb.diff().patch
        reg = ResourceRegistry([Resource("proj", "directory", project)])
        key: str = manager.resolve_sandbox_key(Resource("proj", "directory", project), reg)
        results = manager.commit_all("p")
        n: int = manager.cleanup_abandoned()
        del ok, created, restored, patch, key, n
        return results
