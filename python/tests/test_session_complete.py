"""complete_sandbox routes a delegation's work with a Python decision callable: accept,
reject, an exception (reject: the patch goes pending, the exception is kept), a wrong
return value, no callable, nothing changed; and the pending flow that follows."""

from __future__ import annotations

import pathlib
from typing import List

import pytest

import patchbox
from session_fixtures import _root_in_tmp, git, mgr, project, root, tree  # noqa: F401


def work(mgr: patchbox.SessionManager, name: str) -> patchbox.SandboxInfo:
    sb = mgr.create_sandbox(name)
    (sb.path / "src/util.py").write_bytes(b"X = 1\nY = 2\nZ = 30\n")
    return sb


def test_accept_hands_over_the_patch_and_stores_nothing(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    seen: List[patchbox.SandboxResult] = []

    def decide(r: patchbox.SandboxResult) -> patchbox.Decision:
        seen.append(r)
        return patchbox.Decision.ACCEPT

    sb = work(mgr, "ok")
    done = mgr.complete_sandbox(sb, decide)
    assert done.routed == patchbox.Routed.ACCEPTED
    assert done.pending_path is None and done.decide_error is None
    assert seen[0].files_touched == ["src/util.py"]
    assert done.result.patch == seen[0].patch
    assert not sb.path.exists()
    assert patchbox.list_pending(root) == []
    git(project, "apply", input=done.result.patch)
    assert (project / "src/util.py").read_bytes() == b"X = 1\nY = 2\nZ = 30\n"


def test_a_bool_answer_works_too(mgr: patchbox.SessionManager, root: pathlib.Path) -> None:
    assert mgr.complete_sandbox(work(mgr, "t"), lambda r: True).routed == patchbox.Routed.ACCEPTED
    assert mgr.complete_sandbox(work(mgr, "f"), lambda r: False).routed == patchbox.Routed.PENDING


def test_reject_stores_the_patch_pending(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    sb = work(mgr, "no")
    done = mgr.complete_sandbox(sb, lambda r: patchbox.Decision.REJECT)
    assert done.routed == patchbox.Routed.PENDING
    assert done.pending_path is not None and done.pending_path.read_bytes() == done.result.patch
    assert not sb.path.exists()
    [p] = patchbox.list_pending(root)
    assert p.patch_path == done.pending_path
    assert p.id == f"{mgr.session_id}/no" and p.session == mgr.session_id and p.delegation == "no"
    assert p.project == project.resolve() and p.created > 0
    assert not p.recovered and not p.abandoned
    assert p.preimages is not None and (p.preimages / "src/util.py").read_bytes() == b"X = 1\nY = 2\nZ = 3\n"
    assert patchbox.read_pending("no", root=root) == done.result.patch


def test_a_raising_decide_means_reject(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    class Boom(Exception):
        pass

    def decide(r: patchbox.SandboxResult) -> patchbox.Decision:
        raise Boom("no opinion")

    sb = work(mgr, "boom")
    done = mgr.complete_sandbox(sb, decide)
    assert done.routed == patchbox.Routed.PENDING
    assert isinstance(done.decide_error, Boom) and str(done.decide_error) == "no opinion"
    assert not sb.path.exists()
    [p] = patchbox.list_pending(root)
    git(project, "apply", "--check", input=p.patch_path.read_bytes())


def test_a_wrong_answer_means_reject(mgr: patchbox.SessionManager) -> None:
    done = mgr.complete_sandbox(work(mgr, "odd"), lambda r: "yes")  # type: ignore[arg-type,return-value]
    assert done.routed == patchbox.Routed.PENDING
    assert isinstance(done.decide_error, TypeError)
    assert "str" in str(done.decide_error)


def test_no_decide_means_reject(mgr: patchbox.SessionManager) -> None:
    assert mgr.complete_sandbox(work(mgr, "none")).routed == patchbox.Routed.PENDING


def test_unchanged_work_is_not_routed(mgr: patchbox.SessionManager, root: pathlib.Path) -> None:
    called: List[int] = []
    sb = mgr.create_sandbox("idle")
    def decide(r: patchbox.SandboxResult) -> bool:
        called.append(1)
        return True

    done = mgr.complete_sandbox(sb, decide)
    assert done.routed == patchbox.Routed.UNCHANGED
    assert called == [] and not sb.path.exists()
    assert patchbox.list_pending(root) == []


def test_keyboard_interrupt_propagates_once_the_work_is_pending(mgr: patchbox.SessionManager, root: pathlib.Path) -> None:
    def decide(r: patchbox.SandboxResult) -> bool:
        raise KeyboardInterrupt

    sb = work(mgr, "ctrl-c")
    with pytest.raises(KeyboardInterrupt):
        mgr.complete_sandbox(sb, decide)
    assert [p.delegation for p in patchbox.list_pending(root)] == ["ctrl-c"]
    assert not sb.path.exists()


def test_a_decide_may_call_back_into_the_manager(mgr: patchbox.SessionManager) -> None:
    # The callable runs with the GIL taken again and no lock of the manager held.
    other = mgr.create_sandbox("other")

    def decide(r: patchbox.SandboxResult) -> bool:
        return mgr.finalize_sandbox(other).patch == b""

    assert mgr.complete_sandbox(work(mgr, "nested"), decide).routed == patchbox.Routed.ACCEPTED


def test_write_pending_patch_never_overwrites(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    sb = work(mgr, "twice")
    patch = mgr.finalize_sandbox(sb).patch
    first = mgr.write_pending_patch("twice", patch)
    second = mgr.write_pending_patch("twice", patch.decode())
    third = mgr.write_pending_patch("twice", bytearray(patch))
    assert [first.name, second.name, third.name] == ["twice.patch", "twice.2.patch", "twice.3.patch"]
    assert first.read_bytes() == second.read_bytes() == third.read_bytes() == patch
    ids = [p.id for p in patchbox.list_pending(root)]
    assert ids == [f"{mgr.session_id}/twice", f"{mgr.session_id}/twice.2", f"{mgr.session_id}/twice.3"]
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.read_pending("twice.4", root=root)
    assert e.value.kind == "pending" and "twice.4" in str(e.value)
    with pytest.raises(patchbox.PatchboxError) as e:
        mgr.write_pending_patch("bad/id", patch)
    assert e.value.kind == "invalid_id"
    for i in ids:
        patchbox.drop_pending(i, root=root)
    assert patchbox.list_pending(root) == []
