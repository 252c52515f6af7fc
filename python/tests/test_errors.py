"""The exception hierarchy is what the plan-executor engines catch: public names, and errors
that survive pickling — so they cross ``multiprocessing`` and ``concurrent.futures``."""

from __future__ import annotations

import concurrent.futures
import copy
import importlib
import multiprocessing
import pickle
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple, Type

import pytest

import patchbox
import patchbox.errors

ERRORS: List[Type[patchbox.PatchboxError]] = [
    patchbox.PatchboxError,
    patchbox.SandboxError,
    patchbox.SandboxCreationError,
    patchbox.SandboxCommitError,
    patchbox.SandboxRollbackError,
    patchbox.SandboxStateError,
    patchbox.AtomicCommitError,
    patchbox.ProtocolMismatchError,
]

#: Each class with the keyword attributes an instance of it carries.
SAMPLES: List[Tuple[Type[patchbox.PatchboxError], Dict[str, Any]]] = [
    (patchbox.PatchboxError, {"kind": "io"}),
    (patchbox.SandboxError, {"kind": "sandbox", "sandbox_id": "sb-1"}),
    (patchbox.SandboxCreationError, {"kind": "creation", "sandbox_id": None, "resource_id": "docs"}),
    (patchbox.SandboxCommitError, {"kind": "commit", "sandbox_id": "sb-1", "files": ["a.txt", "b/c.txt"]}),
    (patchbox.SandboxRollbackError, {"kind": "rollback", "sandbox_id": "sb-1", "files": ["a.txt"]}),
    (
        patchbox.SandboxStateError,
        {"kind": "state", "sandbox_id": "sb-1", "from_status": "committed", "to_status": "active"},
    ),
    (
        patchbox.AtomicCommitError,
        {
            "kind": "atomic_commit",
            "sandbox_id": "sb-3",
            "plan_id": "plan-7",
            "rolled_back_ids": ["sb-2", "sb-1"],
            "failed_rollback_ids": ["sb-0"],
        },
    ),
    (patchbox.ProtocolMismatchError, {"kind": "protocol_mismatch", "sandbox_id": None}),
]


def test_hierarchy() -> None:
    assert issubclass(patchbox.SandboxError, patchbox.PatchboxError)
    assert issubclass(patchbox.PatchboxError, Exception)
    for cls in ERRORS[2:]:
        assert issubclass(cls, patchbox.SandboxError), cls
    assert patchbox.__version__


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_has_its_public_name(cls: type) -> None:
    name = cls.__name__
    assert cls.__qualname__ == name and not name.endswith("_")
    assert cls.__module__ == "patchbox.errors"
    assert getattr(importlib.import_module(cls.__module__), name) is cls
    assert getattr(patchbox, name) is cls and name in patchbox.__all__
    assert name in patchbox.errors.__all__
    assert cls.__doc__


def test_the_core_raises_the_public_classes(tmp_path: Path) -> None:
    with pytest.raises(patchbox.SandboxStateError) as e:
        patchbox.SandboxStatus.assert_transition(patchbox.SandboxStatus.COMMITTED, patchbox.SandboxStatus.ACTIVE)
    assert type(e.value) is patchbox.errors.SandboxStateError
    assert (e.value.from_status, e.value.to_status, e.value.kind) == ("committed", "active", "state")
    with pytest.raises(patchbox.PatchboxError) as p:
        patchbox.read_pending("nope", root=tmp_path)
    assert type(p.value) is patchbox.PatchboxError and p.value.kind == "pending"


def test_errors_made_in_python_have_every_attribute() -> None:
    e = patchbox.AtomicCommitError("boom")
    assert (e.kind, e.sandbox_id, e.plan_id, e.rolled_back_ids, e.failed_rollback_ids) == (
        "atomic_commit",
        None,
        "",
        [],
        [],
    )
    assert patchbox.SandboxError().kind == "sandbox" and str(patchbox.SandboxError("x")) == "x"
    assert patchbox.SandboxCommitError("x", files=("a",)).files == ["a"]


def assert_same(a: BaseException, b: BaseException) -> None:
    assert type(a) is type(b)
    assert a.args == b.args and str(a) == str(b)
    assert vars(a) == vars(b)


@pytest.mark.parametrize("cls,attrs", SAMPLES, ids=[c.__name__ for c, _ in SAMPLES])
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_error_round_trips_through_pickle(
    cls: Type[patchbox.PatchboxError], attrs: Dict[str, Any], protocol: int
) -> None:
    e = cls(f"{cls.__name__}: something failed", **attrs)
    for name, value in attrs.items():
        assert getattr(e, name) == value
    back = pickle.loads(pickle.dumps(e, protocol=protocol))
    assert_same(e, back)
    for name, value in attrs.items():
        assert getattr(back, name) == value
    assert_same(e, copy.deepcopy(e))


def test_extra_attributes_survive_pickling() -> None:
    e = patchbox.AtomicCommitError("apply failed", plan_id="p", rolled_back_ids=["a"])
    e.restored = ["a", "b"]  # type: ignore[attr-defined]  (what PhaseRunner adds)
    e.rollback_failures = [("c", "disk full")]  # type: ignore[attr-defined]
    e.phase = "apply"  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(e))
    assert_same(e, back)
    assert back.restored == ["a", "b"] and back.rollback_failures == [("c", "disk full")]  # type: ignore[attr-defined]
    assert isinstance(back, patchbox.SandboxError)


def test_a_raised_error_round_trips_through_pickle(tmp_path: Path) -> None:
    with pytest.raises(patchbox.SandboxStateError) as e:
        _commit_twice(str(tmp_path))
    back = pickle.loads(pickle.dumps(e.value))
    assert_same(e.value, back)
    assert back.sandbox_id and back.from_status == "committed"


# ---------------------------------------------------------------- across processes
# Workers run in a child process and raise what patchbox raised there; module-level so that a
# spawned child can import them.


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _commit_twice(base: str) -> None:
    """A second commit of a committed sandbox: SandboxStateError."""
    original = Path(base) / "orig"
    _write(original / "a.txt", "one\n")
    with patchbox.SandboxManager(Path(base) / "root") as m:
        sb = m.get_or_create_sandbox("plan-1", "docs", original, "copy_on_write")
        sb.write("a.txt", b"two\n")
        sb.commit()
        sb.commit()


def _invalid_plan_id(base: str) -> None:
    """get_or_create_sandbox with a plan id that is no id: SandboxError."""
    original = Path(base) / "orig"
    original.mkdir(parents=True, exist_ok=True)
    with patchbox.SandboxManager(Path(base) / "root") as m:
        m.get_or_create_sandbox("bad/../id", "docs", original, "copy_on_write")


def _conflicting_apply(base: str) -> None:
    """PhaseRunner.apply over a plan whose original changed: the conflict (a sandbox-level
    failure) is a SandboxCommitError with the phase's attributes."""
    a_dir, b_dir, root = Path(base) / "a", Path(base) / "b", Path(base) / "root"
    _write(a_dir / "x.txt", "x\n")
    _write(b_dir / "n.txt", "one\n")
    with patchbox.SandboxManager(root) as m:
        a = m.get_or_create_sandbox("p", "a", a_dir, "copy_on_write")
        b = m.get_or_create_sandbox("p", "b", b_dir, "copy_on_write")
        a.write("x.txt", b"A\n")
        b.write("n.txt", b"B\n")
        (b_dir / "n.txt").write_text("user\n")  # a conflict: commit_all refuses
        with patchbox.CheckpointManager(m) as cps:
            patchbox.PhaseRunner(m, cps).apply("p")


def _missing_pending(base: str) -> None:
    """read_pending of an id that is not there: PatchboxError of kind "pending"."""
    patchbox.read_pending("nope", root=base)


def _check(kind: str, attrs: Dict[str, Any]) -> Callable[[BaseException], None]:
    def check(e: BaseException) -> None:
        assert isinstance(e, patchbox.PatchboxError) and e.kind == kind
        for name, expected in attrs.items():
            got = getattr(e, name)
            assert (expected(got) if callable(expected) else got == expected), (name, got)

    return check


def _is_id(v: object) -> bool:
    return isinstance(v, str) and len(v) > 0


WORKERS = [
    (
        _commit_twice,
        patchbox.SandboxStateError,
        _check("state", {"sandbox_id": _is_id, "from_status": "committed", "to_status": "committed"}),
    ),
    (_invalid_plan_id, patchbox.SandboxError, _check("sandbox", {"sandbox_id": None})),
    (
        _conflicting_apply,
        patchbox.SandboxCommitError,
        _check(
            "commit",
            {
                "sandbox_id": _is_id,
                "phase": "apply",
                "rollback_failures": [],
                "restored": lambda v: isinstance(v, list) and len(v) == 2,
            },
        ),
    ),
    (_missing_pending, patchbox.PatchboxError, _check("pending", {})),
]


@pytest.mark.parametrize("method", [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()])
def test_errors_raised_in_a_worker_process_reach_the_parent(method: str, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        futures = [pool.submit(fn, str(tmp_path / fn.__name__)) for fn, _, _ in WORKERS]
        for fut, (fn, cls, check) in zip(futures, WORKERS):
            with pytest.raises(cls) as e:
                fut.result(timeout=120)
            assert type(e.value) is cls, fn.__name__
            check(e.value)
            # the message is the Rust error's; the worker's traceback rides along as the cause
            assert str(e.value) and "Traceback" in str(e.value.__cause__)
