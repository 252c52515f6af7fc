"""The plan-sandbox docs' examples (seeds 000, 001, 004), run nearly verbatim: module paths
are patchbox's, placeholder paths and ids are real ones under tmp_path, and `...` in the
docs ("the actor writes") is a write. $PATCHBOX_ROOT points into tmp_path (fixture `root`),
so the docs' default-rooted managers never touch $HOME."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import patchbox
from _plan_fixtures import git, project, repo, root, write  # noqa: F401

PLAN = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


# ------------------------------------------------------------------ 001: sandbox module


def test_001_typical_usage_in_plan_execution(root, repo):
    from patchbox import SandboxManager

    manager = SandboxManager()
    # Typical usage in plan execution
    sandbox = manager.get_or_create_sandbox(
        plan_id=PLAN,
        resource_id="res-001",
        original_path=str(repo),
        sandbox_strategy="git_worktree",
    )

    # Translate a resource-relative path to the sandbox copy
    sandboxed_path = sandbox.get_path("src/main.py")
    # ... actor writes to sandboxed_path ...
    Path(sandboxed_path).write_text("print('edited')\n")

    # Commit changes back to the original resource
    result = sandbox.commit(f"Apply edits from plan {PLAN}")
    # result.success, result.changed_files, result.added_files, result.deleted_files
    assert result.success and result.changed_files == ["src/main.py"]
    assert result.added_files == [] and result.deleted_files == []
    assert git(repo, "show", "HEAD:src/main.py") == "print('edited')\n"

    # Or discard changes
    sandbox.rollback()
    assert (repo / "src" / "main.py").read_text() == "print(1)\n"

    # Always clean up when done
    sandbox.cleanup()
    manager.close()


def test_001_atomic_commit_error_handling(root, project, tmp_path, capsys):
    from patchbox import AtomicCommitError, SandboxManager

    manager = SandboxManager()
    other = tmp_path / "other"
    write(other / "x.txt", "x\n")
    good = manager.get_or_create_sandbox("plan-ok", "docs", project, "copy_on_write")
    Path(good.get_path("notes.txt")).write_text("two\n")

    def run(plan_id: str) -> None:
        try:
            results = manager.commit_all(plan_id)
            if not all(r.success for r in results):
                # Partial failure (SandboxError path)
                failed = [r for r in results if not r.success]
                print(f"Commit failed: {failed[0].error}")
        except AtomicCommitError as exc:
            # Unexpected exception during commit
            print(f"Atomic commit failed: {exc}")
            print(f"Rolled back: {exc.rolled_back_ids}")
            print(f"Failed rollbacks: {exc.failed_rollback_ids}")

    plan_id = "plan-ok"
    run(plan_id)
    assert capsys.readouterr().out == ""
    assert (project / "notes.txt").read_text() == "two\n"

    a = manager.get_or_create_sandbox("plan-bad", "other", other, "copy_on_write")
    b = manager.get_or_create_sandbox("plan-bad", "docs", project, "copy_on_write")
    Path(a.get_path("x.txt")).write_text("X\n")
    Path(b.get_path("notes.txt")).write_text("sandbox\n")
    (project / "notes.txt").write_text("user's edit\n")  # a conflict
    plan_id = "plan-bad"
    run(plan_id)
    out = capsys.readouterr().out
    # A conflict is a SandboxError: the documented "Partial failure" path.
    assert out.startswith("Commit failed:") and "notes.txt" in out
    assert (other / "x.txt").read_text() == "x\n"
    manager.close()


def test_001_boundary_algebra(root, repo):
    from patchbox import Resource, ResourceRegistry, SandboxManager

    manager = SandboxManager()
    plan_id = PLAN
    registry = resource_registry = ResourceRegistry()
    resource_registry.add(Resource("repo", "git_repository", repo))
    resource = file_a = Resource("file_a", "file", repo / "README.md")
    file_b = Resource("file_b", "file", repo / "src" / "main.py")
    resource_registry.add(file_a)
    resource_registry.add(file_b)

    # Resources in the same git repo share one sandbox
    sandbox_key = manager.resolve_sandbox_key(resource, resource_registry)
    # → the resource_id of the boundary resource (e.g. the repo root)
    assert sandbox_key == "repo"

    # Multiple resources → same sandbox
    sandbox_a = manager.get_or_create_sandbox_for_resource(plan_id, file_a, registry)
    sandbox_b = manager.get_or_create_sandbox_for_resource(plan_id, file_b, registry)
    assert sandbox_a is sandbox_b  # same boundary → same sandbox
    assert sandbox_a.strategy == "git_worktree"

    manager.clear_boundary_cache()
    manager.cleanup_all(plan_id)
    manager.close()


def test_001_status_transition_validation():
    from patchbox import SandboxStateError, SandboxStatus

    # Check if a transition is valid
    assert SandboxStatus.can_transition(SandboxStatus.ACTIVE, SandboxStatus.COMMITTED)
    assert not SandboxStatus.can_transition(SandboxStatus.CLEANED_UP, SandboxStatus.ACTIVE)

    # Assert transition (raises SandboxStateError on invalid)
    SandboxStatus.assert_transition(SandboxStatus.ACTIVE, SandboxStatus.COMMITTED)
    with pytest.raises(SandboxStateError):
        SandboxStatus.assert_transition(SandboxStatus.CLEANED_UP, SandboxStatus.ACTIVE)


def test_001_testing_section(root, project):
    from patchbox import Sandbox, SandboxManager, SandboxStatus

    manager = SandboxManager()
    my_sandbox = manager.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    my_sandbox.get_path("notes.txt")

    # Verify protocol conformance
    assert isinstance(my_sandbox, Sandbox)

    # Verify status
    assert my_sandbox.status == SandboxStatus.ACTIVE
    manager.close()


def test_001_exception_hierarchy():
    from patchbox import (AtomicCommitError, SandboxCommitError, SandboxCreationError, SandboxError,
                          SandboxRollbackError, SandboxStateError)

    for cls in (SandboxCreationError, SandboxCommitError, SandboxRollbackError, SandboxStateError,
                AtomicCommitError):
        assert issubclass(cls, SandboxError)


# ------------------------------------------------------------------ 000: checkpoints


def test_000_checkpoint_manager_api(root, project):
    from patchbox import CheckpointManager, SandboxManager

    plan_id = PLAN
    sandbox = SandboxManager().get_or_create_sandbox(plan_id, "docs", project, "copy_on_write")
    mgr = CheckpointManager()

    # Create a snapshot before execute
    cp = mgr.create_checkpoint(sandbox, plan_id, "pre_execute", {})
    Path(sandbox.get_path("notes.txt")).write_text("executed\n")

    # Create a snapshot after successful execute
    cp2 = mgr.create_checkpoint(sandbox, plan_id, "post_execute", {"status": "success"})
    Path(sandbox.get_path("notes.txt")).write_text("a failed apply\n")

    # Rollback on failure
    success = mgr.rollback_to(cp)
    assert success and Path(sandbox.get_path("notes.txt")).read_text() == "one\n"

    # List all checkpoints for a sandbox
    checkpoints = mgr.list_checkpoints(sandbox.sandbox_id)
    assert [c.checkpoint_id for c in checkpoints] == [cp.checkpoint_id, cp2.checkpoint_id]
    assert checkpoints[1].metadata == {"status": "success"}

    # Delete a checkpoint
    mgr.delete_checkpoint(cp.checkpoint_id)
    assert [c.phase for c in mgr.list_checkpoints(sandbox.sandbox_id)] == ["post_execute"]
    mgr.close()
    sandbox.cleanup()


# ------------------------------------------------------------------ 004: custom strategies


@pytest.fixture
def company_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    lib = tmp_path / "pylib"
    body = textwrap.dedent("""
        from patchbox import DiffView, SandboxRef

        class {name}:
            def create(self, plan_id, resource): return SandboxRef("{name}", plan_id, resource.resource_id)
            def read(self, ref, path): return None
            def write(self, ref, path, content): return None
            def diff(self, ref): return DiffView(ref.sandbox_id, [], "no changes")
            def commit(self, ref): return None
            def rollback(self, ref): return None
            def checkpoint(self, ref, checkpoint_id): return None
            def restore_checkpoint(self, ref, checkpoint_id): return None
            def cleanup(self, ref): return None
        """)
    write(lib / "mycompany" / "__init__.py", "")
    write(lib / "mycompany" / "sandbox" / "__init__.py", "")
    write(lib / "mycompany" / "sandbox" / "custom.py", body.format(name="MyCustomSandbox"))
    write(lib / "mycompany" / "sandbox" / "redis.py", body.format(name="RedisSandbox"))
    write(lib / "mycompany" / "sandbox" / "s3.py", body.format(name="S3Sandbox"))
    write(lib / "mycompany" / "mymodule.py", "class IncompleteClass:\n    def create(self, plan_id, resource): ...\n")
    monkeypatch.syspath_prepend(str(lib))
    yield lib
    import sys
    for name in [n for n in sys.modules if n.startswith("mycompany")]:
        del sys.modules[name]


def test_004_protocol_shape():
    from patchbox import DiffEntry, DiffView, Resource, SandboxRef
    from patchbox.custom import SandboxStrategyProtocol, validate_strategy

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
    assert SandboxStrategyProtocol is not None


def test_004_config_driven_registration_and_factory(root, project, company_modules):
    from patchbox import SandboxFactory, SandboxManager, SandboxStrategyRegistry

    registry = SandboxStrategyRegistry(
        allowed_prefixes=("cleveragents.", "mycompany."),
    )

    # Single registration
    registry.register(
        "my_strategy",
        "mycompany.sandbox.custom",
        "MyCustomSandbox",
    )

    # Batch config-driven registration
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

    factory = SandboxFactory(custom_registry=registry)

    # Check if custom strategy is available
    if factory.has_custom_strategy("redis_sandbox"):
        cls = factory.get_custom_strategy_class("redis_sandbox")
    assert cls.__name__ == "RedisSandbox"

    # This will raise ProtocolMismatchError if the class
    # doesn't implement all required methods:
    with pytest.raises(patchbox.ProtocolMismatchError):
        registry.register("bad", "mycompany.mymodule", "IncompleteClass")

    with SandboxManager(custom_registry=registry) as manager:
        sb = manager.get_or_create_sandbox("p", "cache", project, "redis_sandbox")
        assert [r.success for r in manager.commit_all("p")] == [True]
        manager.cleanup_all("p")
        assert sb.status == patchbox.SandboxStatus.CLEANED_UP


def test_004_built_in_adapter(root, project):
    from patchbox import BuiltInSandboxStrategyAdapter, Resource

    resource = Resource("res-001", "directory", project)
    adapter = BuiltInSandboxStrategyAdapter(strategy_name="copy_on_write")
    ref = adapter.create("plan-001", resource)
    adapter.write(ref, "file.txt", b"content")
    data = adapter.read(ref, "file.txt")
    assert data == b"content"
    assert not (project / "file.txt").exists()
    assert [e.path for e in adapter.diff(ref).entries] == ["file.txt"]
    adapter.checkpoint(ref, "cp1")
    adapter.write(ref, "file.txt", b"changed")
    adapter.restore_checkpoint(ref, "cp1")
    assert adapter.read(ref, "file.txt") == b"content"
    assert adapter.commit(ref)
    assert (project / "file.txt").read_bytes() == b"content"
    adapter.rollback(ref, after_commit=True)
    assert not (project / "file.txt").exists()
    adapter.cleanup(ref)
    with pytest.raises(patchbox.SandboxError, match="no sandbox"):
        adapter.read(ref, "file.txt")


# ------------------------------------------------------------------ the README's Python example


def test_readme_python_plan_example(root, project, capsys):
    """The 15-line example proposed for the README (paths: tmp_path's)."""
    ROOT, PROJECT = str(root), str(project)
    from patchbox import AtomicCommitError, CheckpointManager, SandboxManager

    with SandboxManager(ROOT) as manager:  # state under <root>/plans
        sb = manager.get_or_create_sandbox("plan-1", "docs", PROJECT, "copy_on_write")
        with open(sb.get_path("notes.txt"), "w") as f:  # the actor writes here
            f.write("two\n")
        checkpoints = CheckpointManager(manager)
        cp = checkpoints.create_checkpoint(sb, "plan-1", "pre_apply")
        print(sb.diff().patch.decode())  # review: a patch `git apply` accepts
        try:
            results = manager.commit_all("plan-1")  # all or nothing
            if all(r.success for r in results):
                print([r.changed_files for r in results])
            else:  # a conflict: the committed ones were rolled back, newest first
                print("commit failed:", results[0].error)
                checkpoints.rollback_to(cp)
        except AtomicCommitError as e:  # an unexpected failure, rolled back too
            print("rolled back:", e.rolled_back_ids)
        manager.cleanup_all("plan-1")

    out = capsys.readouterr().out
    assert "+two" in out and "[['notes.txt']]" in out
    assert (project / "notes.txt").read_text() == "two\n"
