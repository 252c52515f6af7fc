"""Checked by mypy --strict in run-tests.sh: the stubs describe what the package exports."""

from typing import List, Optional

import patchbox
import patchbox.errors


def describe(e: patchbox.AtomicCommitError) -> str:
    return ", ".join(e.rolled_back_ids + e.failed_rollback_ids)


def describe_state(e: patchbox.SandboxStateError) -> str:
    sandbox_id: Optional[str] = e.sandbox_id
    return f"{e.kind}: {e.from_status} -> {e.to_status} ({sandbox_id})"


def refuse(files: List[str]) -> None:
    err: patchbox.errors.SandboxCommitError = patchbox.SandboxCommitError("refused", sandbox_id="sb", files=files)
    raise err


# ---------------------------------------------------------------- session layer


def session_example(project: str, root: str) -> List[str]:
    """A delegation, its completion with a decision callable, the pending store, an apply."""

    def decide(r: patchbox.SandboxResult) -> patchbox.Decision:
        return patchbox.Decision.ACCEPT if len(r.files_touched) < 10 else patchbox.Decision.REJECT

    def swap(p: str) -> None:
        print(p)

    with patchbox.SessionManager(project, root, prune_on_start=False) as mgr:
        sb: patchbox.SandboxInfo = mgr.create_sandbox("fix-tests")
        with patchbox.ScopedSandbox(swap, sb, mgr.project_dir):
            (sb.path / "a.txt").write_text("two\n")
        chained = mgr.create_sandbox("docs", chain_from=sb)
        res: patchbox.SandboxResult = mgr.finalize_sandbox(chained)
        patch: bytes = res.patch
        mgr.discard_sandbox(chained)
        done: patchbox.Completion = mgr.complete_sandbox(sb, decide)
        if done.routed == patchbox.Routed.PENDING and done.pending_path is not None:
            print(done.pending_path.name, done.decide_error)
        mgr.write_pending_patch("by-hand", patch)
    names: List[str] = [p.id for p in patchbox.list_pending(root) if not p.recovered]
    text: bytes = patchbox.read_pending(names[0], root=root)
    report: patchbox.ApplyReport = patchbox.apply_patch(project, text, check=True)
    for f in report.files:
        if f.status == patchbox.FileStatus.CONFLICT:
            names += [c.header for c in f.conflicts]
    if report.outcome is patchbox.Outcome.APPLIED:
        pending: patchbox.ApplyReport = patchbox.apply_pending(names[0], root=root)
        names.append(str(pending))
    store = patchbox.UndoStore(root)
    records: List[patchbox.UndoRecord] = store.list(project)
    if records:
        undone: patchbox.UndoReport = store.undo_last(project)[1]
        names += undone.restored
    patchbox.drop_pending(names[0], root=root)
    pruned: patchbox.PruneReport = patchbox.prune_sessions(root)
    return names + pruned.pruned + [s.id for s in patchbox.list_sessions(root)]

# ---------------------------------------------------------------- plan layer

import datetime
from typing import Dict, List, Optional

from patchbox import (
    BaseSandbox,
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
        sb: BaseSandbox = manager.get_or_create_sandbox("p", "docs", project, SandboxStrategy.COPY_ON_WRITE)
        protocol_view: Sandbox = sb  # every built-in sandbox satisfies the documented protocol
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
        del ok, created, restored, patch, key, n, protocol_view
        return results
