"""The pending flow: a rejected delegation waits in the store; it is listed, read, checked,
applied (3-way against its stored pre-images when the user kept editing) or dropped."""

from __future__ import annotations

import pathlib

import pytest

import patchbox
from session_fixtures import _root_in_tmp, git, make_project, mgr, project, root, tree  # noqa: F401


def reject(mgr: patchbox.SessionManager, name: str, content: bytes) -> patchbox.Completion:
    sb = mgr.create_sandbox(name)
    (sb.path / "src/util.py").write_bytes(content)
    return mgr.complete_sandbox(sb, lambda r: False)


def test_pending_patch_applies_and_leaves_the_store(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    done = reject(mgr, "later", b"X = 1\nY = 2\nZ = 3\nW = 4\n")
    [p] = patchbox.list_pending(root)
    checked = patchbox.apply_pending(p.id, root=root, check=True)
    assert checked.check_only and checked.outcome == patchbox.Outcome.APPLIED
    assert [q.id for q in patchbox.list_pending(root)] == [p.id]  # check mode keeps it
    report = patchbox.apply_pending("later", root=root)
    assert report.outcome == patchbox.Outcome.APPLIED
    assert (project / "src/util.py").read_bytes() == b"X = 1\nY = 2\nZ = 3\nW = 4\n"
    assert patchbox.list_pending(root) == []
    # The apply went through the root's undo store: it can be undone.
    record, undone = patchbox.UndoStore(root).undo_last(project)
    assert undone.restored == ["src/util.py"]
    assert (project / "src/util.py").read_bytes() == b"X = 1\nY = 2\nZ = 3\n"
    assert done.pending_path is not None and not done.pending_path.exists()


def test_pending_patch_merges_three_way_when_the_user_kept_editing(
    mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path
) -> None:
    big = b"".join(b"line %d\n" % i for i in range(1, 21))
    (project / "big.txt").write_bytes(big)
    git(project, "add", "big.txt")
    git(project, "commit", "-qm", "big")
    # A new manager: its snapshot has big.txt.
    with patchbox.SessionManager(project, root, prune_on_start=False) as m:
        sb = m.create_sandbox("edit")
        (sb.path / "big.txt").write_bytes(big.replace(b"line 18\n", b"line eighteen\n"))
        m.complete_sandbox(sb, lambda r: False)
    # Meanwhile the user changed the top of the file and the line next to the hunk's context.
    (project / "big.txt").write_bytes(big.replace(b"line 2\n", b"line two\n").replace(b"line 16\n", b"line sixteen\n"))
    [p] = patchbox.list_pending(root)
    assert p.preimages is not None
    report = patchbox.apply_pending(p.id, root=root)
    assert report.files[0].status in (patchbox.FileStatus.MERGED, patchbox.FileStatus.APPLIED)
    assert report.outcome == patchbox.Outcome.APPLIED
    got = (project / "big.txt").read_bytes()
    assert b"line two\n" in got and b"line sixteen\n" in got and b"line eighteen\n" in got


def test_a_conflicting_pending_patch_stays_pending(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    reject(mgr, "clash", b"X = 1\nY = theirs\nZ = 3\n")
    (project / "src/util.py").write_bytes(b"X = 1\nY = mine\nZ = 3\n")
    report = patchbox.apply_pending("clash", root=root)
    assert report.outcome == patchbox.Outcome.REFUSED
    assert report.files[0].path == "src/util.py" and report.files[0].status == patchbox.FileStatus.CONFLICT
    assert (project / "src/util.py").read_bytes() == b"X = 1\nY = mine\nZ = 3\n"
    assert [p.delegation for p in patchbox.list_pending(root)] == ["clash"]
    patchbox.drop_pending("clash", root=root)
    assert patchbox.list_pending(root) == []


def test_a_pending_patch_applies_to_another_project(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    reject(mgr, "elsewhere", b"X = 1\nY = 2\nZ = 3\nW = 4\n")
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(project), str(copy))
    before = tree(project)
    assert patchbox.apply_pending("elsewhere", copy, root=root).wrote()
    assert (copy / "src/util.py").read_bytes().endswith(b"W = 4\n")
    assert tree(project) == before


def test_ids_may_be_ambiguous_across_sessions(project: pathlib.Path, root: pathlib.Path) -> None:
    for _ in range(2):
        with patchbox.SessionManager(project, root, prune_on_start=False) as m:
            reject(m, "d1", b"X = 9\n")
    pending = patchbox.list_pending(root)
    assert [p.delegation for p in pending] == ["d1", "d1"]
    assert pending[0].session < pending[1].session
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.read_pending("d1", root=root)
    assert e.value.kind == "pending" and "2 pending patches match" in str(e.value)
    assert patchbox.read_pending(pending[1].id, root=root) == pending[1].patch_path.read_bytes()
    for p in pending:
        patchbox.drop_pending(p.id, root=root)
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.drop_pending(pending[0].id, root=root)
    assert e.value.kind == "pending" and str(root) in str(e.value)
    assert list(root.iterdir()) == []


def test_the_default_root_is_patchbox_root(project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with patchbox.SessionManager(project, prune_on_start=False) as m:
        assert m.root == (tmp_path / "default-root").resolve()
        m.write_pending_patch("x", b"--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# x\n")
    [p] = patchbox.list_pending()
    assert patchbox.read_pending(p.id).startswith(b"--- a/README.md")
    patchbox.drop_pending(p.id)
    assert patchbox.list_pending() == []
