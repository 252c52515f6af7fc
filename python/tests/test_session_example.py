"""The Python example proposed for the README's Python section, run nearly verbatim (the
project path and the tool differ)."""

from __future__ import annotations

import pathlib

import patchbox
from session_fixtures import _root_in_tmp, git, project  # noqa: F401


def test_readme_example(project: pathlib.Path) -> None:
    # -------- example (the README shows "/path/to/project" and ["make", "test"])
    with patchbox.SessionManager(project) as mgr:                 # root: $PATCHBOX_ROOT or ~/.entropic/sandbox
        sb = mgr.create_sandbox("fix-tests")                      # copy of the session snapshot
        status = mgr.run(sb, ["sh", "-c", "echo fixed >> README.md"]).returncode  # cwd = sandbox, confined
        follow_up = mgr.create_sandbox("docs", chain_from=sb)     # chained: starts from sb's state
        res = mgr.finalize_sandbox(follow_up)                     # patch vs the session snapshot
        print(len(res.files_touched), "files touched")
        done = mgr.complete_sandbox(sb, lambda r: len(r.files_touched) < 10)  # raises/False: pending
        if done.routed == patchbox.Routed.ACCEPTED:
            report = patchbox.apply_patch(mgr.project_dir, done.result.patch)  # atomic, undoable
            print(report)
        elif done.routed == patchbox.Routed.PENDING:
            print("kept for review:", done.pending_path)
    # leaving the block: base/ and d-*/ removed; follow_up's work kept as a pending patch
    # -------- end of example
    assert status == 0
    assert (project / "README.md").read_bytes() == b"# demo\nfixed\n"
    [p] = patchbox.list_pending()
    assert p.delegation == "docs" and p.abandoned
    git(project, "apply", "--check", "-R", input=patchbox.read_pending(p.id))
    patchbox.drop_pending(p.id)
