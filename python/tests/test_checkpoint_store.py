"""Checkpoints in an object store (here a store directory, the layout a bucket holds): taken
under one root, restored into a sandbox of another root's copy of the project, deleted from the
store with what nothing references. The same against a real S3 server is in the Rust suite."""

from __future__ import annotations

import shutil
from pathlib import Path

import patchbox
from patchbox import CheckpointManager, POST_EXECUTE
from _plan_fixtures import project, root, write  # noqa: F401


def test_a_checkpoint_is_restored_under_another_root(project: Path, root: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "shared-store")
    other_project = tmp_path / "other-project"
    shutil.copytree(project, other_project)

    with patchbox.SandboxManager(root) as a:
        sb = a.get_or_create_sandbox("p", "docs", project, "copy_on_write")
        Path(sb.get_path("notes.txt")).write_text("step 1\n")
        write(Path(sb.get_path("added.txt")), "added\n")
        Path(sb.get_path("old.txt")).unlink()
        with CheckpointManager(root, store=store) as cps:
            cp = cps.create_checkpoint(sb, "p", POST_EXECUTE, {"by": "agent"})
        # Closed: the local copy went, the stored one stays.

    other_root = tmp_path / "other-root"
    with patchbox.SandboxManager(other_root) as b:
        sb2 = b.get_or_create_sandbox("p", "docs", other_project, "copy_on_write")
        with CheckpointManager(other_root, store=store) as cps:
            assert [c.checkpoint_id for c in cps.list_stored()] == [cp.checkpoint_id]
            restored = cps.restore_from_store(sb2, cp.checkpoint_id)
            assert restored is not None and restored.metadata == {"by": "agent"}
            assert Path(sb2.get_path("notes.txt")).read_text() == "step 1\n"
            assert Path(sb2.get_path("added.txt")).read_text() == "added\n"
            assert not Path(sb2.get_path("old.txt")).exists()
            assert (other_project / "notes.txt").read_text() == "one\n"  # the original untouched
            assert cps.delete_checkpoint(cp.checkpoint_id)
            assert cps.list_stored() == []
            assert cps.restore_from_store(sb2, cp.checkpoint_id) is None
            assert cps.prune_store(0) >= 1
    assert not any(p.is_file() for p in (tmp_path / "shared-store").rglob("*"))
