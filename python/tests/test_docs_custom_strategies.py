"""The plan executors' custom-strategy page, statement by statement: the nine-method
protocol, SandboxRef, DiffEntry/DiffView, the registry and its allow-list, the factory and
the built-in adapter. Module paths are patchbox's
(``cleveragents.domain.models.core.sandbox_strategy`` → ``patchbox.plan.sandbox_strategy``,
``cleveragents.infrastructure.sandbox.X`` → ``patchbox.plan.X``)."""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime
from pathlib import Path
from typing import Dict, List

import pytest

from _plan_fixtures import project, root, write  # noqa: F401

PLAN = "plan-001"


class KeyValueSandbox:
    """A custom strategy over a dict ("the original" is ``published``), written from the
    page: ``create`` returns a SandboxRef with metadata, ``write`` returns its DiffEntry."""

    published: Dict[str, bytes] = {}
    refs_seen: List[object] = []

    def __init__(self) -> None:
        self.staged: Dict[str, Dict[str, bytes]] = {}

    def create(self, plan_id, resource):
        from patchbox.plan.sandbox_strategy import SandboxRef

        ref = SandboxRef(f"kv-{resource.resource_id}", plan_id, resource.resource_id,
                         metadata={"attempt": 3, "tags": ["a", "b"], "label": "x", "when": datetime(2026, 1, 2)})
        self.staged[ref.sandbox_id] = {}
        return ref

    def read(self, ref, path):
        KeyValueSandbox.refs_seen.append(ref)
        return self.staged.setdefault(ref.sandbox_id, {}).get(path, KeyValueSandbox.published.get(path))

    def write(self, ref, path, content):
        from patchbox.plan.sandbox_strategy import DiffEntry

        KeyValueSandbox.refs_seen.append(ref)
        before = self.read(ref, path)
        self.staged.setdefault(ref.sandbox_id, {})[path] = content
        return DiffEntry(path=path, operation="added" if before is None else "modified", before=before, after=content)

    def diff(self, ref):
        from patchbox.plan.sandbox_strategy import DiffEntry, DiffView

        entries = [DiffEntry(p, "added" if p not in KeyValueSandbox.published else "modified", KeyValueSandbox.published.get(p), c)
                   for p, c in sorted(self.staged.get(ref.sandbox_id, {}).items())]
        return DiffView(sandbox_id=ref.sandbox_id, entries=entries, summary=f"{len(entries)} keys")

    def commit(self, ref):
        KeyValueSandbox.published.update(self.staged.get(ref.sandbox_id, {}))

    def rollback(self, ref):
        self.staged[ref.sandbox_id] = {}

    def checkpoint(self, ref, checkpoint_id):
        pass

    def restore_checkpoint(self, ref, checkpoint_id):
        pass

    def cleanup(self, ref):
        self.staged.pop(ref.sandbox_id, None)


@pytest.fixture
def kv_registry():
    from patchbox.plan.strategy_registry import SandboxStrategyRegistry

    KeyValueSandbox.published, KeyValueSandbox.refs_seen = {}, []
    registry = SandboxStrategyRegistry()
    registry.register_class("kv", KeyValueSandbox)
    return registry


@pytest.fixture
def company_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    lib = tmp_path / "pylib"
    write(lib / "mycompany" / "__init__.py", "")
    write(lib / "mycompany" / "sandbox" / "__init__.py", "")
    body = "from tests_kv import KeyValueSandbox as {name}\n"
    write(lib / "tests_kv.py", "import sys\nKeyValueSandbox = sys.modules['test_docs_custom_strategies'].KeyValueSandbox\n")
    for mod, name in (("custom", "MyCustomSandbox"), ("redis", "RedisSandbox"), ("s3", "S3Sandbox")):
        write(lib / "mycompany" / "sandbox" / f"{mod}.py", body.format(name=name))
    write(lib / "mycompany" / "mymodule.py", "class IncompleteClass:\n    def create(self, plan_id, resource): ...\n")
    monkeypatch.syspath_prepend(str(lib))
    yield lib
    for name in [n for n in sys.modules if n.startswith("mycompany") or n == "tests_kv"]:
        del sys.modules[name]


# ------------------------------------------------------------------ SandboxStrategy Protocol


def test_the_nine_method_protocol():
    """"All custom sandbox strategies must implement the 9-method SandboxStrategyProtocol"
    — the page's class skeleton validates; one missing a method does not."""
    from patchbox.custom import validate_strategy
    from patchbox.plan.protocol import SandboxError
    from patchbox.plan.resource import Resource
    from patchbox.plan.sandbox_strategy import DiffEntry, DiffView, SandboxRef, SandboxStrategyProtocol

    class MyCustomSandbox:
        def create(self, plan_id: str, resource: Resource) -> SandboxRef: ...
        def read(self, ref: SandboxRef, path: str) -> bytes: ...
        def write(self, ref: SandboxRef, path: str, content: bytes) -> DiffEntry: ...
        def diff(self, ref: SandboxRef) -> DiffView: ...
        def commit(self, ref: SandboxRef) -> None: ...
        def rollback(self, ref: SandboxRef) -> None: ...
        def checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None: ...
        def restore_checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None: ...
        def cleanup(self, ref: SandboxRef) -> None: ...

    validate_strategy("mine", MyCustomSandbox)
    assert [m for m in vars(SandboxStrategyProtocol) if not m.startswith("_")] == [
        "create", "read", "write", "diff", "commit", "rollback", "checkpoint", "restore_checkpoint", "cleanup",
    ]

    class Eight(MyCustomSandbox):
        cleanup = None  # type: ignore[assignment]

    with pytest.raises(SandboxError, match="cleanup"):
        validate_strategy("eight", Eight)


# ------------------------------------------------------------------ Supporting Models


def test_sandbox_ref_is_the_documented_frozen_dataclass():
    """``@dataclass(frozen=True) class SandboxRef`` with sandbox_id, plan_id, resource_id,
    created_at and ``metadata: dict[str, object] = field(default_factory=dict)``."""
    from patchbox.plan.sandbox_strategy import SandboxRef

    now = datetime.now()
    ref = SandboxRef("s", "p", "r", now)
    assert dataclasses.is_dataclass(ref)
    assert [f.name for f in dataclasses.fields(ref)] == ["sandbox_id", "plan_id", "resource_id", "created_at", "metadata"]
    assert ref.metadata == {} and ref.metadata is not SandboxRef("t", "p", "r", now).metadata
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.plan_id = "q"  # type: ignore[misc]
    ref2 = SandboxRef("s", "p", "r", now, {"attempt": 3, "nested": {"k": [1, 2]}})
    assert ref2.metadata == {"attempt": 3, "nested": {"k": [1, 2]}}
    assert dataclasses.asdict(ref2)["metadata"]["attempt"] == 3
    assert dataclasses.replace(ref2, plan_id="q").plan_id == "q"


def test_diff_entry_and_diff_view_fields():
    """DiffEntry: path, operation ("added", "modified", "deleted"), before, after; DiffView:
    sandbox_id, entries, summary."""
    from patchbox.plan.sandbox_strategy import DiffEntry, DiffView

    e = DiffEntry(path="a.txt", operation="deleted", before=b"x", after=None)
    assert (e.path, e.operation, e.before, e.after) == ("a.txt", "deleted", b"x", None)
    with pytest.raises(ValueError):
        DiffEntry(path="a.txt", operation="renamed", before=None, after=None)
    v = DiffView(sandbox_id="s", entries=[e], summary="1 deleted")
    assert (v.sandbox_id, [x.path for x in v.entries], v.summary) == ("s", ["a.txt"], "1 deleted")


def test_the_ref_create_returns_is_passed_to_every_other_method(root, kv_registry, tmp_path):
    """"Opaque reference returned by create() and passed to all other methods" — the very
    object, its metadata as given (an int stays an int)."""
    from patchbox.plan.manager import SandboxManager

    with SandboxManager(custom_registry=kv_registry) as manager:
        sb = manager.get_or_create_sandbox(PLAN, "cache", tmp_path, "kv")
        sb.write("k", b"v")
        assert sb.read("k") == b"v"
        first = KeyValueSandbox.refs_seen[0]
        assert all(r is first for r in KeyValueSandbox.refs_seen)
        assert first.sandbox_id == "kv-cache"  # type: ignore[attr-defined]
        assert first.metadata == {"attempt": 3, "tags": ["a", "b"], "label": "x", "when": datetime(2026, 1, 2)}  # type: ignore[attr-defined]
        assert sb.context is not None and sb.context.metadata["label"] == "x"
        manager.cleanup_all(PLAN)


def test_ref_metadata_keeps_its_json_types_across_a_restart(root, kv_registry, tmp_path):
    """The reference a reopened sandbox's strategy receives has the metadata its create
    returned, typed: the library stores it as JSON."""
    from patchbox.plan.manager import SandboxManager
    from patchbox.plan.strategy_registry import SandboxStrategyRegistry

    with SandboxManager(custom_registry=kv_registry) as manager:
        sb = manager.get_or_create_sandbox(PLAN, "cache", tmp_path, "kv")
        sb.write("k", b"v")  # active with changes: kept on disk at close
        sid = sb.sandbox_id
    KeyValueSandbox.refs_seen = []
    again = SandboxStrategyRegistry()
    again.register_class("kv", KeyValueSandbox)
    with SandboxManager(custom_registry=again) as manager:
        found = manager.get_sandbox(PLAN, "cache")
        assert found is not None and found.sandbox_id == sid
        found.read("k")
        ref = KeyValueSandbox.refs_seen[-1]
        assert ref.sandbox_id == "kv-cache"  # type: ignore[attr-defined]
        assert ref.metadata["attempt"] == 3 and ref.metadata["tags"] == ["a", "b"]  # type: ignore[attr-defined]
        assert ref.metadata["when"] == "2026-01-02 00:00:00"  # not JSON: kept as its str  # type: ignore[attr-defined]
        manager.cleanup_all(PLAN)


def test_custom_sandboxes_satisfy_the_sandbox_protocol(root, kv_registry, tmp_path):
    """A custom strategy's sandboxes are sandboxes like the others (``Sandbox`` protocol),
    of the class ``CustomSandbox``."""
    from patchbox.plan import CustomSandbox
    from patchbox.plan.manager import SandboxManager
    from patchbox.plan.protocol import Sandbox

    with SandboxManager(custom_registry=kv_registry) as manager:
        sb = manager.get_or_create_sandbox(PLAN, "cache", tmp_path, "kv")
        assert isinstance(sb, Sandbox) and isinstance(sb, CustomSandbox) and sb.strategy == "kv"
        sb.write("k", b"v")
        assert [r.success for r in manager.commit_all(PLAN)] == [True]
        assert KeyValueSandbox.published == {"k": b"v"}
        manager.cleanup_all(PLAN)


# ------------------------------------------------------------------ Registration


def test_single_and_batch_registration(company_modules):
    """The "Config-Driven Registration" block, as written."""
    from patchbox.plan.strategy_registry import SandboxStrategyRegistry

    registry = SandboxStrategyRegistry(
        allowed_prefixes=("cleveragents.", "mycompany."),
    )
    registry.register(
        "my_strategy",
        "mycompany.sandbox.custom",
        "MyCustomSandbox",
    )
    configs = {
        "redis_sandbox": {
            "module": "mycompany.sandbox.redis",
            "class": "RedisSandbox",
        },
        "s3_sandbox": {
            "module": "mycompany.sandbox.s3",
            "class": "S3Sandbox",
        },
    }
    registry.register_all_from_config(configs)
    assert registry.list_strategies() == ["my_strategy", "redis_sandbox", "s3_sandbox"]


def test_imports_are_restricted_to_the_allowed_prefixes(company_modules):
    """"Module imports are restricted to a configurable prefix allowlist (default:
    ("cleveragents.",))" — the module is not even imported."""
    from patchbox.plan.protocol import SandboxError
    from patchbox.plan.strategy_registry import SandboxStrategyRegistry

    registry = SandboxStrategyRegistry()
    assert registry.allowed_prefixes == ("cleveragents.",)
    with pytest.raises(SandboxError, match="not allowed"):
        registry.register("my_strategy", "mycompany.sandbox.custom", "MyCustomSandbox")
    assert "mycompany.sandbox.custom" not in sys.modules


def test_registration_validates_the_protocol(company_modules):
    """"This will raise ProtocolMismatchError if the class doesn't implement all required
    methods" — naming the missing ones."""
    from patchbox.errors import ProtocolMismatchError
    from patchbox.plan.strategy_registry import SandboxStrategyRegistry

    registry = SandboxStrategyRegistry(allowed_prefixes=("mycompany.",))
    with pytest.raises(ProtocolMismatchError) as e:
        registry.register("bad", "mycompany.mymodule", "IncompleteClass")
    for m in ("read", "write", "diff", "commit", "rollback", "checkpoint", "restore_checkpoint", "cleanup"):
        assert m in str(e.value)
    assert not registry.has_custom_strategy("bad")


def test_factory_integration(company_modules):
    """The "Factory Integration" block: has_custom_strategy, get_custom_strategy_class."""
    from patchbox.plan.factory import SandboxFactory
    from patchbox.plan.strategy_registry import SandboxStrategyRegistry

    registry = SandboxStrategyRegistry(allowed_prefixes=("mycompany.",))
    registry.register_all_from_config({"redis_sandbox": {"module": "mycompany.sandbox.redis", "class": "RedisSandbox"}})
    factory = SandboxFactory(custom_registry=registry)
    cls = None
    if factory.has_custom_strategy("redis_sandbox"):
        cls = factory.get_custom_strategy_class("redis_sandbox")
    assert cls is KeyValueSandbox
    assert not factory.has_custom_strategy("s3_sandbox")


# ------------------------------------------------------------------ Built-In Strategy Adapter


def test_the_adapter_snippet(root, project):
    """The "Built-In Strategy Adapter" block, as written; ``write`` returns its DiffEntry."""
    from patchbox.plan.resource import Resource
    from patchbox.plan.sandbox_strategy import DiffEntry, SandboxRef
    from patchbox.plan.strategy_adapter import BuiltInSandboxStrategyAdapter

    resource = Resource("res-001", "directory", project)
    adapter = BuiltInSandboxStrategyAdapter(strategy_name="copy_on_write")
    ref = adapter.create("plan-001", resource)
    assert isinstance(ref, SandboxRef) and dataclasses.is_dataclass(ref)
    entry = adapter.write(ref, "file.txt", b"content")
    assert isinstance(entry, DiffEntry)
    assert (entry.path, entry.operation, entry.before, entry.after) == ("file.txt", "added", None, b"content")
    data = adapter.read(ref, "file.txt")
    assert data == b"content"
    again = adapter.write(ref, "notes.txt", b"two\n")
    assert (again.operation, again.before, again.after) == ("modified", b"one\n", b"two\n")
    assert not (project / "file.txt").exists()
    adapter.cleanup(ref)


def test_the_adapter_conforms_to_the_protocol():
    """"wraps existing Sandbox implementations to conform to the SandboxStrategyProtocol"."""
    from patchbox.custom import validate_strategy
    from patchbox.plan.strategy_adapter import BuiltInSandboxStrategyAdapter

    validate_strategy("adapter", BuiltInSandboxStrategyAdapter)
