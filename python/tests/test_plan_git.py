"""git_worktree sandboxes against a real repository, with the git CLI as the oracle."""

from __future__ import annotations

from pathlib import Path

import pytest

import patchbox
from patchbox import SandboxStatus
from _plan_fixtures import git, manager, repo, root, write  # noqa: F401


def test_worktree_commit_lands_on_the_branch(manager, repo):
    head = git(repo, "rev-parse", "HEAD").strip()
    sb = manager.get_or_create_sandbox("plan-g", "repo", repo, "git_worktree")
    ctx = sb.context
    assert ctx is not None and ctx.metadata  # git facts (branch, base)
    assert sb.sandbox_id in git(repo, "worktree", "list")
    Path(sb.get_path("src/main.py")).write_text("print(2)\n")
    write(Path(sb.get_path("docs/new.md")), "# new\n")
    assert (repo / "src" / "main.py").read_text() == "print(1)\n"
    assert git(repo, "status", "--porcelain") == ""

    d = sb.diff()
    assert [(e.path, e.operation) for e in d.entries] == [("docs/new.md", "added"), ("src/main.py", "modified")]
    [r] = manager.commit_all("plan-g")
    assert r.success and r.changed_files == ["src/main.py"] and r.added_files == ["docs/new.md"]
    new_head = git(repo, "rev-parse", "HEAD").strip()
    assert r.commit_ref == new_head and new_head != head
    assert git(repo, "rev-parse", "HEAD~1").strip() == head
    assert git(repo, "show", "HEAD:src/main.py") == "print(2)\n"
    assert (repo / "docs" / "new.md").read_text() == "# new\n"
    assert git(repo, "status", "--porcelain") == ""

    sb.rollback()  # a revert commit, never a reset
    assert sb.status == SandboxStatus.ROLLED_BACK
    assert git(repo, "show", "HEAD:src/main.py") == "print(1)\n"
    assert git(repo, "rev-parse", "HEAD~1").strip() == new_head
    assert not (repo / "docs" / "new.md").exists()
    manager.cleanup_all("plan-g")
    assert sb.sandbox_id not in git(repo, "worktree", "list")
    assert "patchbox/" not in git(repo, "branch", "--list")


def test_dirty_user_file_refuses_the_commit(manager, repo):
    sb = manager.get_or_create_sandbox("plan-g", "repo", repo, "git_worktree")
    Path(sb.get_path("README.md")).write_text("sandbox\n")
    (repo / "README.md").write_text("user's uncommitted edit\n")
    head = git(repo, "rev-parse", "HEAD").strip()
    [failed] = manager.commit_all("plan-g")  # a sandbox-level failure: the one failed result
    assert not failed.success and failed.sandbox_id == sb.sandbox_id
    assert "README.md" in (failed.error or "")
    assert (repo / "README.md").read_text() == "user's uncommitted edit\n"
    assert git(repo, "rev-parse", "HEAD").strip() == head
    manager.cleanup_all("plan-g")


def test_active_rollback_resets_the_worktree(manager, repo):
    sb = manager.get_or_create_sandbox("plan-g", "repo", repo, "git_worktree")
    Path(sb.get_path("README.md")).write_text("scratch\n")
    sb.rollback()
    assert Path(sb.get_path("README.md")).read_text() == "hello\n"
    manager.cleanup_all("plan-g")
