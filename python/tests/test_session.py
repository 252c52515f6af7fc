"""SessionManager against a real git project: sandboxes, patches git accepts, discard,
pending patches, errors that name their path, and the session left clean."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys

import pytest

import patchbox
from session_fixtures import _root_in_tmp, git, mgr, project, root, sessions_in, tree  # noqa: F401


def edit(sb: patchbox.SandboxInfo) -> None:
    """A delegation's work: a modification, a new file, a deletion, a binary change, a mode change."""
    (sb.path / "src/util.py").write_bytes(b"X = 1\nY = 20\nZ = 3\n")
    (sb.path / "src/new.py").write_bytes(b"print('new')\n")
    (sb.path / "old.txt").unlink()
    (sb.path / "data/blob.bin").write_bytes(bytes(reversed(range(256))))
    os.chmod(sb.path / "src/main.py", 0o755)


def test_sandbox_is_a_copy_and_the_project_is_never_written(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    before = tree(project)
    sb = mgr.create_sandbox("task")
    assert isinstance(sb.path, pathlib.Path)
    assert sb.delegation_id == "task"
    assert sb.path == mgr.session_base / "d-task"
    assert tree(sb.path) == before
    edit(sb)
    mgr.finalize_sandbox(sb)
    assert tree(project) == before


def test_finalized_patch_is_accepted_by_git_apply(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    sb = mgr.create_sandbox("task")
    edit(sb)
    res = mgr.finalize_sandbox(sb)
    assert res.files_touched == ["data/blob.bin", "old.txt", "src/main.py", "src/new.py", "src/util.py"]
    assert res.added == ["src/new.py"]
    assert res.deleted == ["old.txt"]
    assert sorted(res.modified) == ["data/blob.bin", "src/main.py", "src/util.py"]
    assert isinstance(res.patch, bytes)
    assert "+Y = 20" in res.patch_text
    assert res.head_dir == sb.path
    git(project, "apply", "--check", input=res.patch)
    git(project, "apply", input=res.patch)
    assert tree(project) == tree(sb.path)
    assert os.stat(project / "src/main.py").st_mode & stat.S_IXUSR


def test_unchanged_sandbox_has_an_empty_patch(mgr: patchbox.SessionManager) -> None:
    res = mgr.finalize_sandbox(mgr.create_sandbox("idle"))
    assert res.patch == b""
    assert res.files_touched == []


def test_ignored_outputs_are_listed_not_patched(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    (project / ".gitignore").write_text("build/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore")
    # The snapshot is taken at the first create_sandbox: the .gitignore is in it.
    sb = mgr.create_sandbox("build")
    (sb.path / "build").mkdir()
    (sb.path / "build/out.o").write_bytes(b"\0obj")
    res = mgr.finalize_sandbox(sb)
    assert res.patch == b""
    assert res.ignored == ["build/out.o"]


def test_chained_sandbox_starts_from_its_predecessor_and_its_patch_is_cumulative(
    mgr: patchbox.SessionManager, project: pathlib.Path
) -> None:
    first = mgr.create_sandbox("first")
    (first.path / "README.md").write_bytes(b"# demo\nfirst\n")
    second = mgr.create_sandbox("second", first)
    assert (second.path / "README.md").read_bytes() == b"# demo\nfirst\n"
    assert second.base_dir == first.base_dir
    (second.path / "second.txt").write_bytes(b"2\n")
    res = mgr.finalize_sandbox(second)
    assert res.files_touched == ["README.md", "second.txt"]
    git(project, "apply", "--check", input=res.patch)


def test_discard_removes_the_sandbox_and_is_idempotent(mgr: patchbox.SessionManager) -> None:
    sb = mgr.create_sandbox("gone")
    mgr.discard_sandbox(sb)
    assert not sb.path.exists()
    mgr.discard_sandbox(sb)
    # The id is free again.
    again = mgr.create_sandbox("gone")
    assert again.path.exists()


def test_discard_refuses_what_is_not_a_sandbox_of_the_session(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    fake = patchbox.SandboxInfo(project, "task", project)
    with pytest.raises(patchbox.PatchboxError) as e:
        mgr.discard_sandbox(fake)
    assert e.value.kind == "containment"
    assert str(project) in str(e.value)
    assert (project / "README.md").exists()


def test_errors_name_the_id_or_path(mgr: patchbox.SessionManager, tmp_path: pathlib.Path) -> None:
    with pytest.raises(patchbox.PatchboxError) as e:
        mgr.create_sandbox("../escape")
    assert e.value.kind == "invalid_id"
    assert "../escape" in str(e.value)
    sb = mgr.create_sandbox("dup")
    with pytest.raises(patchbox.PatchboxError) as e:
        mgr.create_sandbox("dup")
    assert e.value.kind == "id_in_use" and "dup" in str(e.value)
    mgr.discard_sandbox(sb)
    with pytest.raises(patchbox.PatchboxError) as e:
        mgr.finalize_sandbox(sb)
    assert e.value.kind == "unknown_sandbox" and str(sb.path) in str(e.value)
    missing = tmp_path / "no-such-project"
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.SessionManager(missing, tmp_path / "r2", prune_on_start=False)
    assert e.value.kind == "not_a_directory" and str(missing) in str(e.value)
    with pytest.raises(TypeError):
        mgr.write_pending_patch("x", 42)  # type: ignore[arg-type]


def test_sandbox_info_round_trips(mgr: patchbox.SessionManager) -> None:
    sb = mgr.create_sandbox("keep")
    copy = patchbox.SandboxInfo(str(sb.path), sb.delegation_id, sb.base_dir)
    assert copy == sb
    assert "keep" in repr(sb)
    # A handle rebuilt from its fields works like the original.
    (sb.path / "k.txt").write_bytes(b"k\n")
    assert mgr.finalize_sandbox(copy).added == ["k.txt"]


def test_accessors(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    assert mgr.project_dir == project.resolve()
    assert mgr.root == root.resolve()
    assert mgr.session_base == root.resolve() / mgr.session_id
    assert len(mgr.session_id) == 26
    assert not mgr.closed
    assert mgr.confinement() in ("enforced", "off") or mgr.confinement().startswith("unavailable")
    assert mgr.skipped() == []
    assert mgr.symlinks_into_project() == []
    assert mgr.startup_recovery() is None  # prune_on_start=False


def test_snapshot_reports_what_it_skipped(mgr: patchbox.SessionManager, project: pathlib.Path) -> None:
    os.mkfifo(project / "pipe")
    os.symlink(project / "README.md", project / "abs-link")
    mgr.create_sandbox("s")
    assert [p for p, _ in mgr.skipped()] == ["pipe"]
    assert mgr.symlinks_into_project() == ["abs-link"]


def test_with_block_ends_the_session(project: pathlib.Path, root: pathlib.Path) -> None:
    with patchbox.SessionManager(project, root, prune_on_start=False) as m:
        sb = m.create_sandbox("a")
        session = m.session_base
        assert sb.path.exists()
    assert m.closed
    assert not session.exists()
    with pytest.raises(patchbox.PatchboxError) as e:
        m.create_sandbox("b")
    assert e.value.kind == "closed"
    m.close()  # idempotent
    assert sessions_in(root) == []


def test_an_open_sandbox_is_kept_as_an_abandoned_pending_patch(project: pathlib.Path, root: pathlib.Path) -> None:
    m = patchbox.SessionManager(project, root, prune_on_start=False)
    sb = m.create_sandbox("left-open")
    (sb.path / "README.md").write_bytes(b"# changed\n")
    m.close()
    [p] = patchbox.list_pending(root)
    assert p.delegation == "left-open" and p.abandoned and not p.recovered
    git(project, "apply", "--check", input=patchbox.read_pending(p.id, root=root))
    patchbox.drop_pending(p.id, root=root)
    assert sessions_in(root) == []


def test_progress_is_reported_from_copy_threads_while_the_gil_is_released(project: pathlib.Path, root: pathlib.Path) -> None:
    # The copy threads call back into Python: were the GIL held by create_sandbox, this
    # would deadlock rather than finish.
    seen: list[tuple[int, int, int]] = []
    with patchbox.SessionManager(project, root, prune_on_start=False, progress=lambda *p: seen.append(p)) as m:
        m.create_sandbox("p")
    assert seen
    done, total, _ = seen[-1]
    assert done <= total and total >= 5


def test_a_raising_progress_callable_does_not_break_the_copy(
    project: pathlib.Path, root: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bad(*_: int) -> None:
        raise RuntimeError("progress")

    reported: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    with patchbox.SessionManager(project, root, prune_on_start=False, progress=bad) as m:
        sb = m.create_sandbox("p")
        assert (sb.path / "README.md").exists()
    assert reported and isinstance(reported[0], RuntimeError)


def test_dead_sessions_are_recovered_and_pruned(project: pathlib.Path, root: pathlib.Path) -> None:
    # A session whose manager never ended (a crash) is simulated by a second process.
    code = (
        "import os, patchbox, sys\n"
        "m = patchbox.SessionManager(sys.argv[1], sys.argv[2], prune_on_start=False)\n"
        "sb = m.create_sandbox('crashed')\n"
        "open(os.path.join(sb.path, 'README.md'), 'w').write('crash work\\n')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(project), str(root)], check=True)
    [s] = patchbox.list_sessions(root)
    assert not s.live and s.sandboxes == ["d-crashed"] and s.project == project.resolve()
    report = patchbox.prune_sessions(root)
    assert report.pruned == [s.id] and len(report.recovered) == 1 and report.errors == []
    [p] = patchbox.list_pending(root)
    assert p.recovered and p.delegation == "crashed"
    git(project, "apply", "--check", input=patchbox.read_pending(p.id, root=root))
    patchbox.drop_pending(p.id, root=root)
    assert sessions_in(root) == []


def test_prune_sweeps_superseded_shared_layers(root: pathlib.Path) -> None:
    # Of a project's two shared layers, the older one (nobody holds or names it) goes; the
    # newest stays for the project's next session.
    store = root / "lowers" / "0123456789abcdef"
    old, new = store / "01M8ZA0000000000000000000A", store / "01M8ZB0000000000000000000B"
    for layer in (old, new):
        (layer / "tree").mkdir(parents=True)
        (layer / "manifest").write_bytes(b"x")
    report = patchbox.prune_sessions(root)
    assert report.errors == [] and report.shared_layers_removed == 1
    assert not old.exists() and (new / "manifest").exists()
    assert patchbox.prune_sessions(root).shared_layers_removed == 0


def test_startup_recovery_reports_what_it_did(project: pathlib.Path, root: pathlib.Path) -> None:
    with patchbox.SessionManager(project, root) as m:
        r = m.startup_recovery()
        assert r is not None and r.errors == [] and r.pruned == []
