"""apply_patch, undo_apply, recover_project and UndoStore on real directories, with patches
made by git itself (git diff --binary) and by the session layer; the per-file report."""

from __future__ import annotations

import pathlib

import pytest

import patchbox
from session_fixtures import _root_in_tmp, git, make_project, mgr, project, root, tree  # noqa: F401


def git_patch(project: pathlib.Path) -> bytes:
    """Edits the project's work tree, takes `git diff --binary` of it, and resets the tree."""
    (project / "src/util.py").write_bytes(b"X = 1\nY = 2\nZ = 3\nW = 4\n")
    (project / "new dir").mkdir()
    (project / "new dir/new file.txt").write_bytes(b"spaces\n")
    (project / "old.txt").unlink()
    (project / "data/blob.bin").write_bytes(b"\x00\x01" * 50)
    git(project, "add", "-A")
    patch = git(project, "diff", "--cached", "--binary").stdout
    git(project, "reset", "-q", "--hard")
    return patch


def expected_after(project: pathlib.Path, patch: bytes, tmp: pathlib.Path) -> dict[str, bytes]:
    """The tree git apply makes of a copy of the project: the oracle."""
    oracle = tmp / "oracle"
    git(tmp, "clone", "-q", str(project), str(oracle))
    git(oracle, "apply", input=patch)
    return tree(oracle)


def test_a_git_patch_applies_as_git_applies_it(project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    patch = git_patch(project)
    want = expected_after(project, patch, tmp_path)
    report = patchbox.apply_patch(project, patch)
    assert report.outcome == patchbox.Outcome.APPLIED and report.is_ok() and report.wrote()
    assert not report.check_only and report.undo_dir is None and report.recovery.is_empty()
    assert {f.path: f.status for f in report.files} == {
        "data/blob.bin": patchbox.FileStatus.APPLIED,
        "new dir/new file.txt": patchbox.FileStatus.APPLIED,
        "old.txt": patchbox.FileStatus.APPLIED,
        "src/util.py": patchbox.FileStatus.APPLIED,
    }
    assert report.count(patchbox.FileStatus.APPLIED) == 4
    assert "patch was applied: 4 applied" in str(report)
    assert tree(project) == want
    again = patchbox.apply_patch(project, patch.decode("latin-1").encode("latin-1"))
    assert again.outcome == patchbox.Outcome.ALREADY_APPLIED and not again.wrote()


def test_check_writes_nothing(project: pathlib.Path) -> None:
    patch = git_patch(project)
    before = tree(project)
    report = patchbox.apply_patch(project, patch, check=True)
    assert report.check_only and report.outcome == patchbox.Outcome.APPLIED and not report.wrote()
    assert "would be applied" in str(report)
    assert tree(project) == before


def test_a_conflict_refuses_the_whole_patch_and_names_the_file(project: pathlib.Path) -> None:
    patch = git_patch(project)
    (project / "src/util.py").write_bytes(b"X = 1\nY = 2\nZ = mine\n")
    before = tree(project)
    report = patchbox.apply_patch(project, patch)
    assert report.outcome == patchbox.Outcome.REFUSED and not report.is_ok() and not report.wrote()
    [bad] = [f for f in report.files if f.status != patchbox.FileStatus.APPLIED]
    assert bad.path == "src/util.py" and bad.status == patchbox.FileStatus.CONFLICT
    assert bad.conflicts and bad.conflicts[0].hunk == 1 and bad.conflicts[0].header.startswith("@@")
    assert str(bad.status) == "conflict"
    assert "nothing was written" in str(report)
    assert tree(project) == before


def test_three_way_merge_with_preimages_and_conflict_markers(project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "f.txt").write_bytes(b"1\n2\n3\n4\n5\n6\n7\n8\n")
    patch = b"--- a/f.txt\n+++ b/f.txt\n@@ -6,3 +6,3 @@\n 6\n-7\n+seven\n 8\n"
    (project / "f.txt").write_bytes(b"one\n2\n3\n4\n5\n6\n7\n8\n")
    merged = patchbox.apply_patch(project, patch, preimages=base)
    assert merged.outcome == patchbox.Outcome.APPLIED
    assert (project / "f.txt").read_bytes() == b"one\n2\n3\n4\n5\n6\nseven\n8\n"
    (project / "f.txt").write_bytes(b"1\n2\n3\n4\n5\n6\nmine\n8\n")
    with_markers = patchbox.apply_patch(project, patch, preimages=base, conflict_markers=True)
    assert with_markers.outcome == patchbox.Outcome.APPLIED_WITH_CONFLICTS
    [f] = with_markers.files
    assert f.markers_written and f.status == patchbox.FileStatus.CONFLICT
    assert b"<<<<<<<" in (project / "f.txt").read_bytes()
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.apply_patch(project, patch, preimages=tmp_path / "missing")
    assert e.value.kind == "io" and str(tmp_path / "missing") in str(e.value)


def test_unsafe_and_malformed_patches_raise_or_are_refused(project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    before = tree(project)
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.apply_patch(project, b"--- a/x\n+++ b/../escape\n@@ -0,0 +1 @@\n+x\n")
    assert e.value.kind in ("containment", "patch_parse") and "escape" in str(e.value)
    dotgit = b"diff --git a/.git/hooks/x b/.git/hooks/x\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/x\n@@ -0,0 +1 @@\n+evil\n"
    report = patchbox.apply_patch(project, dotgit)
    assert report.outcome == patchbox.Outcome.REFUSED
    assert report.files[0].status == patchbox.FileStatus.REFUSED and report.files[0].detail
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.apply_patch(project, b"@@ garbage\n")
    assert e.value.kind == "patch_parse"
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.apply_patch(tmp_path / "nowhere", b"")
    assert str(tmp_path / "nowhere") in str(e.value)
    assert tree(project) == before
    assert not (tmp_path / "escape").exists()


def test_undo_apply_restores_the_project(project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    before = tree(project)
    patch = git_patch(project)
    undo = tmp_path / "undo-1"
    report = patchbox.apply_patch(project, patch, undo_dir=undo)
    assert report.undo_dir == undo
    assert tree(project) != before
    u = patchbox.undo_apply(project, undo)
    assert sorted(u.restored) == ["data/blob.bin", "new dir/new file.txt", "old.txt", "src/util.py"]
    assert u.overwritten == [] and not u.already_undone
    assert tree(project) == before
    assert patchbox.undo_apply(project, undo).already_undone


def test_undo_refuses_files_changed_since_unless_forced(project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    undo = tmp_path / "undo"
    patchbox.apply_patch(project, git_patch(project), undo_dir=undo)
    (project / "src/util.py").write_bytes(b"edited after\n")
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.undo_apply(project, undo)
    assert e.value.kind == "apply_failed" and "src/util.py" in str(e.value)
    forced = patchbox.undo_apply(project, undo, force=True)
    assert forced.overwritten == ["src/util.py"]
    assert (project / "src/util.py").read_bytes() == b"X = 1\nY = 2\nZ = 3\n"


def test_undo_store_records_lists_and_undoes(project: pathlib.Path, root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    store = patchbox.UndoStore(root)
    assert store.dir == root / "undo"
    before = tree(project)
    patch = git_patch(project)
    assert store.apply(project, patch, check=True).check_only
    assert store.list() == []
    report = store.apply(project, patch)
    assert report.wrote() and report.undo_dir is not None
    [rec] = store.list(project)
    assert rec.state == "applied" and rec.paths == 4 and rec.project == project.resolve() and rec.created > 0
    other = make_project(tmp_path / "other", {"a": b"a\n"})
    assert store.list(other) == []
    record, undone = store.undo_last(project)
    assert record.id == rec.id and len(undone.restored) == 4
    assert tree(project) == before
    assert store.list() == []
    with pytest.raises(patchbox.PatchboxError) as e:
        store.undo_last(project)
    assert e.value.kind == "pending" and str(project.resolve()) in str(e.value)
    store.apply(project, patch)
    [rec] = store.list()
    store.undo(project, rec.id)
    assert tree(project) == before and store.list() == []
    store.apply(project, patch)
    [rec] = store.list()
    store.drop(rec.id)
    assert store.list() == [] and store.prune() == []
    with pytest.raises(patchbox.PatchboxError) as e:
        store.drop("not-a-ulid")
    assert e.value.kind == "invalid_id"


def test_undo_store_default_root_is_patchbox_root(tmp_path: pathlib.Path) -> None:
    assert patchbox.UndoStore().dir == tmp_path / "default-root" / "undo"


def test_recover_project_finishes_an_interrupted_apply(project: pathlib.Path) -> None:
    assert patchbox.recover_project(project).is_empty()
    (project / ".patchbox-txn-01J0000000000000000000000").mkdir()
    r = patchbox.recover_project(project)
    assert [name for name, _ in r.recovered] == [".patchbox-txn-01J0000000000000000000000"]
    assert r.recovered[0][1] in ("rolled_back", "rolled_forward", "cleaned_up")
    assert not (project / ".patchbox-txn-01J0000000000000000000000").exists()


def test_a_session_patch_applies_with_apply_patch(mgr: patchbox.SessionManager, project: pathlib.Path, tmp_path: pathlib.Path) -> None:
    sb = mgr.create_sandbox("work")
    (sb.path / "src/util.py").write_bytes(b"X = 1\n")
    (sb.path / "data/blob.bin").write_bytes(b"\xff" * 10)
    (sb.path / "link").symlink_to("src/util.py")
    res = mgr.finalize_sandbox(sb)
    want = expected_after(project, res.patch, tmp_path)
    assert patchbox.apply_patch(project, res.patch).outcome == patchbox.Outcome.APPLIED
    assert tree(project) == want == tree(sb.path)
