"""Custom strategies written in Python, registered and validated, driven by the Rust manager
through commit_all (including a failing commit that rolls the others back, newest first)."""

from __future__ import annotations

import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import patchbox
from patchbox import (
    DiffEntry, DiffView, SandboxFactory, SandboxManager, SandboxRef, SandboxStatus,
    SandboxStrategyRegistry,
)
from _plan_fixtures import project, root, write  # noqa: F401


class DirStrategy:
    """Stages writes in memory; a commit writes them into the original directory; a rollback
    after commit puts the previous contents back."""

    def __init__(self) -> None:
        self.staged: Dict[str, Dict[str, bytes]] = {}
        self.saved: Dict[str, Dict[str, Optional[bytes]]] = {}
        self.original: Dict[str, Path] = {}
        self.checkpoints: Dict[str, Dict[str, bytes]] = {}
        self.calls: List[str] = []
        self.lock = threading.Lock()

    def create(self, plan_id: str, resource: patchbox.Resource) -> SandboxRef:
        self.calls.append("create")
        sid = f"dir-{resource.resource_id}"
        self.staged[sid] = {}
        self.original[sid] = Path(resource.path)
        return SandboxRef(sid, plan_id, resource.resource_id, metadata={"root": resource.path, "shards": 3})

    def read(self, ref: SandboxRef, path: str) -> Optional[bytes]:
        if path in self.staged[ref.sandbox_id]:
            return self.staged[ref.sandbox_id][path]
        p = self.original[ref.sandbox_id] / path
        return p.read_bytes() if p.exists() else None

    def write(self, ref: SandboxRef, path: str, content: bytes) -> DiffEntry:
        self.staged[ref.sandbox_id][path] = content
        return DiffEntry(path, "modified", None, content)

    def diff(self, ref: SandboxRef) -> DiffView:
        entries = []
        for path, data in sorted(self.staged[ref.sandbox_id].items()):
            p = self.original[ref.sandbox_id] / path
            before = p.read_bytes() if p.exists() else None
            entries.append(DiffEntry(path, "added" if before is None else "modified", before, data))
        return DiffView(ref.sandbox_id, entries, f"{len(entries)} staged")

    def commit(self, ref: SandboxRef) -> str:
        self.calls.append("commit")
        saved = {}
        for path, data in self.staged[ref.sandbox_id].items():
            p = self.original[ref.sandbox_id] / path
            saved[path] = p.read_bytes() if p.exists() else None
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        self.saved[ref.sandbox_id] = saved
        return f"commit-of-{ref.sandbox_id}"

    def rollback(self, ref: SandboxRef, after_commit: bool = False) -> None:
        self.calls.append(f"rollback(after_commit={after_commit})")
        if not after_commit:
            self.staged[ref.sandbox_id].clear()
            return
        for path, data in self.saved.pop(ref.sandbox_id, {}).items():
            p = self.original[ref.sandbox_id] / path
            if data is None:
                p.unlink()
            else:
                p.write_bytes(data)

    def checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None:
        self.checkpoints[checkpoint_id] = dict(self.staged[ref.sandbox_id])

    def restore_checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None:
        self.staged[ref.sandbox_id] = dict(self.checkpoints[checkpoint_id])

    def cleanup(self, ref: SandboxRef) -> None:
        self.calls.append("cleanup")
        self.staged.pop(ref.sandbox_id, None)


class FailingCommit(DirStrategy):
    is_rollbackable = False  # commit_all commits it last

    def commit(self, ref: SandboxRef) -> str:
        raise OSError("disk quota exceeded on the remote store")


class FailingUndo(DirStrategy):
    def rollback(self, ref: SandboxRef, after_commit: bool = False) -> None:
        if after_commit:
            raise RuntimeError("the remote refuses the undo")
        super().rollback(ref, after_commit)


@pytest.fixture
def registry() -> SandboxStrategyRegistry:
    return SandboxStrategyRegistry(allowed_prefixes=("mycompany.",))


def dirs(tmp_path: Path, *names: str) -> List[Path]:
    out = []
    for n in names:
        write(tmp_path / n / "f.txt", f"{n} original\n")
        out.append(tmp_path / n)
    return out


def test_custom_strategy_through_commit_all(root, registry, tmp_path):
    strat = DirStrategy()
    registry.register_instance("dirstage", strat)
    [d] = dirs(tmp_path, "res")
    with SandboxManager(root, custom_registry=registry) as m:
        assert m.has_custom_strategy("dirstage")
        sb = m.get_or_create_sandbox("p", "res", d, "dirstage")
        assert sb.strategy == "dirstage" and sb.status == SandboxStatus.CREATED
        assert sb.context is not None and sb.context.metadata["root"] == str(d)
        assert sb.context.metadata["shards"] == 3  # kept as given
        sb.write("f.txt", b"staged\n")
        sb.write("sub/new.txt", b"new\n")
        assert sb.read("f.txt") == b"staged\n"
        assert sb.read("missing") is None
        assert (d / "f.txt").read_text() == "res original\n"
        diff = sb.diff()
        assert [(e.path, e.operation) for e in diff.entries] == [("f.txt", "modified"), ("sub/new.txt", "added")]
        [r] = m.commit_all("p")
        assert r.success and r.commit_ref == "commit-of-dir-res"
        assert (d / "f.txt").read_text() == "staged\n" and (d / "sub" / "new.txt").read_text() == "new\n"
        sb.rollback()
        assert strat.calls[-1] == "rollback(after_commit=True)"
        assert (d / "f.txt").read_text() == "res original\n" and not (d / "sub" / "new.txt").exists()
        m.cleanup_all("p")
        assert strat.calls[-1] == "cleanup"


def test_failing_custom_commit_rolls_back_the_others_lifo(root, registry, tmp_path):
    registry.register_class("failing", FailingCommit)
    a_dir, b_dir, c_dir = dirs(tmp_path, "a", "b", "c")
    with SandboxManager(root, custom_registry=registry) as m:
        a = m.get_or_create_sandbox("p", "a", a_dir, "copy_on_write")
        b = m.get_or_create_sandbox("p", "b", b_dir, "copy_on_write")
        c = m.get_or_create_sandbox("p", "c", c_dir, "failing")
        Path(a.get_path("f.txt")).write_text("A\n")
        Path(b.get_path("f.txt")).write_text("B\n")
        c.write("f.txt", b"C\n")
        with pytest.raises(patchbox.AtomicCommitError) as e:
            m.commit_all("p")
        err = e.value
        assert err.rolled_back_ids == [b.sandbox_id, a.sandbox_id]  # newest first
        assert err.failed_rollback_ids == []
        assert err.sandbox_id == c.sandbox_id
        assert "disk quota exceeded on the remote store" in str(err)
        assert isinstance(err, patchbox.SandboxError)
        for d, name in ((a_dir, "a"), (b_dir, "b"), (c_dir, "c")):
            assert (d / "f.txt").read_text() == f"{name} original\n"
        # compensation keeps the work: the plan can commit again once the cause is fixed
        assert a.status == SandboxStatus.ACTIVE and Path(a.get_path("f.txt")).read_text() == "A\n"
        m.cleanup_all("p")


def test_a_failed_compensation_is_reported(root, registry, tmp_path):
    registry.register_class("undo_fails", FailingUndo)
    registry.register_class("failing", FailingCommit)
    x_dir, y_dir = dirs(tmp_path, "x", "y")
    with SandboxManager(root, custom_registry=registry) as m:
        x = m.get_or_create_sandbox("p", "x", x_dir, "undo_fails")
        y = m.get_or_create_sandbox("p", "y", y_dir, "failing")
        x.write("f.txt", b"X\n")
        y.write("f.txt", b"Y\n")
        with pytest.raises(patchbox.AtomicCommitError) as e:
            m.commit_all("p")
        assert e.value.rolled_back_ids == []
        assert e.value.failed_rollback_ids == [x.sandbox_id]
        assert "the remote refuses the undo" in str(e.value)
        m.cleanup_all("p")


def test_each_class_registered_sandbox_gets_its_own_instance(root, registry, tmp_path):
    made: List[Any] = []

    class Counting(DirStrategy):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    registry.register_class("counting", Counting)
    one, two = dirs(tmp_path, "one", "two")
    with SandboxManager(root, custom_registry=registry) as m:
        m.get_or_create_sandbox("p", "one", one, "counting")
        m.get_or_create_sandbox("p", "two", two, "counting")
        assert len(made) == 2
        m.cleanup_all("p")


def test_strategy_errors_become_the_steps_errors(root, registry, tmp_path):
    class Broken(DirStrategy):
        def create(self, plan_id: str, resource: patchbox.Resource) -> SandboxRef:
            raise ValueError("no credentials for the bucket")

    class BadDiff(DirStrategy):
        def diff(self, ref: SandboxRef) -> DiffView:
            return DiffView(ref.sandbox_id, [DiffEntry("x", "added")])

        def read(self, ref: SandboxRef, path: str) -> Optional[bytes]:
            raise PermissionError(f"denied: {path}")

    registry.register_class("broken", Broken)
    registry.register_class("baddiff", BadDiff)
    [d] = dirs(tmp_path, "r")
    with SandboxManager(root, custom_registry=registry) as m:
        with pytest.raises(patchbox.SandboxCreationError, match="no credentials for the bucket"):
            m.get_or_create_sandbox("p", "r", d, "broken")
        assert m.get_sandbox("p", "r") is None
        sb = m.get_or_create_sandbox("p", "r2", d, "baddiff")
        with pytest.raises(patchbox.SandboxError, match="denied: secret"):
            sb.read("secret")
        assert [e.path for e in sb.diff().entries] == ["x"]
        m.cleanup_all("p")


def test_custom_checkpoints_call_the_strategy(root, registry, tmp_path):
    strat = DirStrategy()
    registry.register_instance("dirstage", strat)
    [d] = dirs(tmp_path, "r")
    with SandboxManager(root, custom_registry=registry) as m, patchbox.CheckpointManager(root) as cps:
        sb = m.get_or_create_sandbox("p", "r", d, "dirstage")
        sb.write("f.txt", b"v1\n")
        cp = cps.create_checkpoint(sb, "p", "pre_apply")
        sb.write("f.txt", b"v2\n")
        assert cps.rollback_to(cp)
        assert sb.read("f.txt") == b"v1\n"
        m.cleanup_all("p")


def test_reopened_manager_reaches_the_strategys_own_ref(root, registry, tmp_path):
    strat = DirStrategy()
    registry.register_instance("dirstage", strat)
    [d] = dirs(tmp_path, "r")
    m = SandboxManager(root, custom_registry=registry)
    sb = m.get_or_create_sandbox("p", "r", d, "dirstage")
    sb.write("f.txt", b"kept\n")
    m.close()  # active with changes: kept on disk
    again = SandboxManager(root, custom_registry=registry)
    found = again.get_sandbox("p", "r")
    assert found is not None and found.sandbox_id == sb.sandbox_id
    assert found.read("f.txt") == b"kept\n"  # the driver rebuilt SandboxRef("dir-r", ...)
    again.commit_all("p")
    assert (d / "f.txt").read_text() == "kept\n"
    again.cleanup_all("p")
    again.close()


def test_validation_at_registration(registry):
    class Incomplete:
        def create(self, plan_id: str, resource: Any) -> None: ...
        def read(self, ref: Any, path: str) -> bytes: return b""
        diff = "not callable"

    with pytest.raises(patchbox.ProtocolMismatchError) as e:
        registry.register_class("bad", Incomplete)
    for m in ("write", "diff", "commit", "rollback", "checkpoint", "restore_checkpoint", "cleanup"):
        assert m in str(e.value)
    assert "create" not in str(e.value).split("missing")[1]
    assert not registry.has_custom_strategy("bad")
    registry.register_class("good", DirStrategy)
    with pytest.raises(patchbox.SandboxError, match="already registered"):
        registry.register_class("good", DirStrategy)
    with pytest.raises(patchbox.SandboxError, match="built-in"):
        registry.register_class("copy_on_write", DirStrategy)
    assert registry.names() == ["good"]


@pytest.fixture
def mycompany(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "pylib"
    write(pkg / "mycompany" / "__init__.py", "")
    write(pkg / "mycompany" / "sandbox" / "__init__.py", "")
    write(pkg / "mycompany" / "sandbox" / "custom.py", textwrap.dedent("""
        from patchbox import SandboxRef, DiffView
        class MyCustomSandbox:
            def create(self, plan_id, resource): return SandboxRef("m", plan_id, resource.resource_id)
            def read(self, ref, path): return None
            def write(self, ref, path, content): return None
            def diff(self, ref): return DiffView(ref.sandbox_id, [])
            def commit(self, ref): return None
            def rollback(self, ref): return None
            def checkpoint(self, ref, checkpoint_id): return None
            def restore_checkpoint(self, ref, checkpoint_id): return None
            def cleanup(self, ref): return None
        class IncompleteClass:
            def create(self, plan_id, resource): return None
        """))
    write(pkg / "evil" / "__init__.py", "raise SystemExit('imported!')\n")
    monkeypatch.syspath_prepend(str(pkg))
    yield pkg
    for name in [n for n in sys.modules if n.startswith("mycompany")]:
        del sys.modules[name]


def test_registration_by_module_under_allowed_prefixes(root, registry, mycompany, tmp_path):
    registry.register("my_strategy", "mycompany.sandbox.custom", "MyCustomSandbox")
    with pytest.raises(patchbox.ProtocolMismatchError):
        registry.register("bad", "mycompany.sandbox.custom", "IncompleteClass")
    with pytest.raises(patchbox.SandboxError, match="not allowed") as e:
        registry.register("evil", "evil", "Anything")
    assert e.value.kind == "not_allowed" and "evil" not in sys.modules  # never imported
    with pytest.raises(patchbox.SandboxError, match="no class"):
        registry.register("nope", "mycompany.sandbox.custom", "Missing")
    with pytest.raises(patchbox.SandboxError, match="cannot import"):
        registry.register("nope", "mycompany.missing", "X")
    registry.register_all_from_config({"cfg_a": {"module": "mycompany.sandbox.custom", "class": "MyCustomSandbox"}})
    factory = SandboxFactory(custom_registry=registry)
    assert factory.has_custom_strategy("cfg_a") and not factory.has_custom_strategy("redis")
    assert factory.get_custom_strategy_class("my_strategy").__name__ == "MyCustomSandbox"
    [d] = dirs(tmp_path, "r")
    with SandboxManager(root, custom_registry=registry) as m:
        sb = m.get_or_create_sandbox("p", "r", d, "my_strategy")
        assert [r.success for r in m.commit_all("p")] == [True]
        assert sb.status == SandboxStatus.COMMITTED
        m.cleanup_all("p")


def test_default_prefix_allows_only_cleveragents(mycompany):
    reg = SandboxStrategyRegistry()
    assert reg.allowed_prefixes == ("cleveragents.",)
    with pytest.raises(patchbox.SandboxError, match="not allowed"):
        reg.register("my_strategy", "mycompany.sandbox.custom", "MyCustomSandbox")


def test_status_is_readable_while_a_python_commit_runs(root, registry, tmp_path):
    """The commit holds the sandbox's lock while its Python code runs. A thread reading the
    sandbox meanwhile waits for that lock; it must not hold the GIL while it waits, or the
    commit's Python code could never go on (a deadlock)."""
    in_commit = threading.Event()
    go_on = threading.Event()

    class Slow(DirStrategy):
        def commit(self, ref: SandboxRef) -> str:
            in_commit.set()
            go_on.wait()  # releases the GIL; returning from it needs the GIL again
            return super().commit(ref)

    registry.register_class("slow", Slow)
    [d] = dirs(tmp_path, "r")
    with SandboxManager(root, custom_registry=registry) as m:
        sb = m.get_or_create_sandbox("p", "r", d, "slow")
        sb.write("f.txt", b"slow\n")
        results: List[Any] = []
        t = threading.Thread(target=lambda: results.append(m.commit_all("p")))
        t.start()
        in_commit.wait()
        go_on.set()
        status = sb.status  # waits (without the GIL) for the commit to finish
        listed = m.list_sandboxes("p")
        t.join()
        assert status == SandboxStatus.COMMITTED and listed == [sb]
        assert [r.success for r in results[0]] == [True]
        assert (d / "f.txt").read_text() == "slow\n"
        m.cleanup_all("p")
