"""Pending patches in an object store shared by machines: a session delivers them there, a
reviewer with another root and another copy of the project lists, reads, applies (3-way
against the stored pre-images) and drops them; a store that cannot be reached keeps the work
locally until ``push_pending``. The store here is a directory (the layout a bucket holds);
the same calls against a real S3 server are covered by the Rust suite."""

from __future__ import annotations

import pathlib
import shutil

import pytest

import patchbox
from session_fixtures import _root_in_tmp, git, make_project, project, root  # noqa: F401


def test_a_reviewer_elsewhere_applies_a_stored_patch(project: pathlib.Path, root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    store = str(tmp_path / "shared-store")
    big = b"".join(b"line %d\n" % i for i in range(1, 21))
    (project / "big.txt").write_bytes(big)
    git(project, "add", "big.txt")
    git(project, "commit", "-qm", "big")
    copy = tmp_path / "reviewer-copy"
    shutil.copytree(project, copy)
    with patchbox.SessionManager(project, root, prune_on_start=False, store=store) as m:
        for new in (b"line ten\n", b"line 10\nmore\n"):
            sb = m.create_sandbox("d1")
            (sb.path / "big.txt").write_bytes(big.replace(b"line 10\n", new))
            d = m.deliver_pending_patch("d1", m.finalize_sandbox(sb).patch)
            assert d.place == "stored" and d.url == store and d.path is None
            m.discard_sandbox(sb)
        session = m.session_id
    assert patchbox.list_pending(root) == []  # nothing stayed local

    stored = patchbox.list_stored(store)
    assert [s.id for s in stored] == [f"{session}/d1", f"{session}/d1.2"]
    assert stored[0].files == 1 and stored[0].delegation == "d1" and stored[0].project == project.resolve()
    assert b"+line ten" in patchbox.read_stored(stored[0].id, store=store)

    # The reviewer's copy moved on around the hunk: only the stored pre-image lets it merge.
    moved = big.replace(b"line 8\n", b"line eight\n").replace(b"line 12\n", b"line twelve\n")
    (copy / "big.txt").write_bytes(moved)
    report = patchbox.apply_stored(stored[0].id, copy, store=store, root=tmp_path / "reviewer-root")
    assert report.outcome == patchbox.Outcome.APPLIED
    assert (copy / "big.txt").read_bytes() == moved.replace(b"line 10\n", b"line ten\n")
    assert [s.id for s in patchbox.list_stored(store)] == [stored[1].id]
    patchbox.drop_stored(stored[1].id, store=store)
    assert patchbox.list_stored(store) == []
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.read_stored(stored[1].id, store=store)
    assert e.value.kind == "pending"


def test_an_unreachable_store_keeps_the_work_until_pushed(
    project: pathlib.Path, root: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Port 9 of the loopback address: nothing listens there.
    for k, v in {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}.items():
        monkeypatch.setenv(k, v)
    with patchbox.SessionManager(project, root, prune_on_start=False, store="s3://fleet/x") as m:
        sb = m.create_sandbox("d1")
        (sb.path / "src/util.py").write_bytes(b"changed\n")
        d = m.deliver_pending_patch("d1", m.finalize_sandbox(sb).patch)
        m.discard_sandbox(sb)
    assert d.place == "kept" and d.error and d.path is not None and d.path.exists()
    [local] = patchbox.list_pending(root)
    with pytest.raises(patchbox.PatchboxError) as e:
        patchbox.list_stored("s3://fleet/x")
    assert e.value.kind == "store"

    store = str(tmp_path / "shared-store")
    pushed, failed = patchbox.push_pending(store, root=root)
    assert failed == [] and [p[0] for p in pushed] == [local.id]
    assert patchbox.list_pending(root) == []
    assert b"+changed" in patchbox.read_stored(pushed[0][1], store=store)
