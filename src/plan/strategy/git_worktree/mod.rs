//! `git_worktree`: the sandbox is a linked worktree of the resource's repository, on a branch
//! of its own, kept under the library's root; a commit is a git commit that reaches the
//! user's branch by fast-forward only, so the user's uncommitted work is never discarded.
//!
//! ```text
//! <plan dir>/<sandbox id>/
//!   state.json    the lifecycle record
//!   tree/         the linked worktree (branch patchbox/<plan>/<sandbox id>), what get_path
//!                 points into (or its subdirectory when the resource is one)
//!   scratch.index a temporary index: diff and commit stage the worktree here
//! <plans dir>/git-locks/<hash>.lock   flock per repository (its common git dir)
//! ```
//!
//! The worktree starts at the original's `HEAD` commit (`git.base`). Every git call runs the
//! git CLI with the repository-locating variables removed (`GIT_DIR`, `GIT_WORK_TREE`,
//! `GIT_INDEX_FILE`, …), `LC_ALL=C`, no prompts, and a fallback identity when none is
//! configured. Git operations on one repository are serialized: a process-wide lock keyed
//! by the canonical common git dir, plus an `flock` under the plans directory.
//!
//! **Diff**: every non-ignored file of the resource's part of the worktree is staged into
//! `scratch.index` (`git add -A`), which is compared with the base commit; the patch is
//! `git diff --binary`.
//!
//! **Commit**: the staged tree becomes a commit `C` (parent: the base) on the sandbox branch.
//! If the user's branch is still at the base, the target is `C`; if it moved, the target is
//! a merge commit of the branch tip and `C` computed by `git merge-tree --write-tree` (git
//! 2.38+) without touching the user's tree — a conflict refuses, naming the files, with
//! nothing changed. Files the target changes that are dirty in the user's tree (modified,
//! staged, untracked or ignored in the way) refuse the commit, named. Otherwise the target
//! is recorded as in flight, then `git merge --ff-only <target>` runs in the user's tree: it
//! updates the user's index and files and advances the branch, and refuses (never
//! overwrites) when local changes are in the way. `commit_ref` is the target.
//!
//! **Rollback** from `Committed`: a revert commit whose tree is the branch tip with the
//! committed paths set back to the target's first parent, reached by fast-forward in the
//! same way; refused, naming the files, when the branch or the user's tree changed them
//! since. From `Active`: `git reset --hard <base>` and `git clean -fdx` in the worktree only.
//!
//! **Cleanup**: `git worktree remove --force`, `git branch -D`, `git worktree prune`.
//!
//! **Limits** (documented choices):
//! - A detached `HEAD` in the original may be sandboxed, but its commit is refused: commits
//!   land on a branch. So is a commit after the user switched to another branch.
//! - Submodules checked out in the original are initialised in the worktree from the
//!   original's checkouts (`protocol.file.allow=always`, no network). Changes inside a
//!   submodule are out of scope: they are neither in the diff nor committed.
//! - Crash: the target of a commit (`commit_in_flight`) and of a revert
//!   (`git.revert_in_flight` in the metadata) is persisted before the user's branch is
//!   touched; reopening settles it by asking whether it is an ancestor of the user's branch.
//!   A crash inside `merge --ff-only`, after it updated the user's files and before it moved
//!   the branch, leaves those changes in the user's tree as uncommitted changes (nothing
//!   lost); the commit is then reported as not landed.
//! - The user's branch is never moved backwards: a rollback after commit is a revert commit
//!   (history keeps both), never a reset.
//! - Files named in errors are paths of the repository (not of the resource).
//! - The `flock` lives under the plans directory, so it serializes the processes sharing
//!   one root; nothing is written into the user's `.git` for locking. Git's own
//!   `index.lock` still guards against any other git running in the user's tree.
//! - User hooks: sandbox commits are made with `commit-tree` (no hooks); the fast-forward in
//!   the user's tree runs their `post-merge` hook as any `git merge` would.

//!
//! The files, one idea each: `git.rs` runs git (environment, identity, error messages),
//! `lock.rs` holds the repository lock, `raw.rs` reads git's machine output, `repo.rs` the
//! recorded repository facts and the questions asked of the user's repository; the
//! operations are `lifecycle.rs` (create, cleanup, reopen), `diff.rs`, `commit.rs` and
//! `rollback.rs`. This file keeps the [`GitWorktree`] type and its [`Backend`] impl.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Env;
use crate::id::PlanId;
use crate::plan::backend::{Backend, Checkpoints, NativeCheckpoints};
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::{Lifecycle, Record, State};

mod checkpoint;
mod commit;
mod diff;
mod git;
mod lifecycle;
mod lock;
mod raw;
mod repo;
mod rollback;
mod settle;

use crate::plan::strategy::factory::FnFactory;
use lock::with_repo_lock;
use repo::Repo;

/// The worktree's directory, in the sandbox directory.
const TREE: &str = "tree";
/// The temporary index diff and commit stage the worktree into, in the sandbox directory.
const SCRATCH_INDEX: &str = "scratch.index";
/// Metadata key of a revert commit started and not known to have reached the user's branch.
const REVERT_IN_FLIGHT: &str = "git.revert_in_flight";

/// A `git_worktree` sandbox.
pub struct GitWorktree {
    lc: Lifecycle,
    env: Arc<Env>,
    resource_id: String,
    original: PathBuf,
}

impl GitWorktree {
    /// A pending sandbox for `original`.
    pub fn new(env: Arc<Env>, plan_dir: &Path, resource_id: &str, original: &Path) -> Self {
        GitWorktree {
            lc: Lifecycle::pending(Strategy::GitWorktree, plan_dir),
            env,
            resource_id: resource_id.to_string(),
            original: original.to_path_buf(),
        }
    }

    /// A sandbox found on disk; a commit interrupted by a crash is settled here: it landed
    /// when its target is on the user's branch.
    pub fn open(env: Arc<Env>, record: Record, dir: PathBuf) -> Result<Self, SandboxError> {
        let sb = GitWorktree {
            resource_id: record.resource_id.clone(),
            original: record.original_path.clone(),
            lc: Lifecycle::loaded(record, dir),
            env,
        };
        // A commit it shows in flight is settled by the first operation that takes the
        // plan's lock (see `op`): opening proves nothing about its committer, whose git may
        // still be running.
        Ok(sb)
    }

    /// The hold of an operation that changes the sandbox or the user's repository: the
    /// plan's lock, the operation lock, the state as on disk, and a dead committer's commit
    /// settled from the repository itself.
    pub(super) fn op(&self) -> Result<crate::plan::record::OpGuard<'_>, SandboxError> {
        self.lc.lock_op(|st| self.reconcile(st))
    }

    fn repo(&self, st: &State) -> Result<Repo, SandboxError> {
        let r = st.record.as_ref().ok_or_else(|| {
            SandboxError::sandbox(Some(self.lc.id().as_str()), "sandbox has no context")
        })?;
        Repo::from_record(r, self.lc.dir())
    }

    fn err(&self, what: &str, e: String) -> SandboxError {
        SandboxError::sandbox(Some(self.lc.id().as_str()), format!("{what}: {e}"))
    }

    /// Runs `f` holding the repository lock (see `lock.rs`); its errors name this sandbox.
    fn locked<R>(
        &self,
        repo: &Repo,
        f: impl FnOnce() -> Result<R, SandboxError>,
    ) -> Result<R, SandboxError> {
        with_repo_lock(&self.env.plans_dir, &repo.common, f)
            .map_err(|e| e.for_sandbox(self.lc.id().as_str()))
    }
}

impl Backend for GitWorktree {
    fn lifecycle(&self) -> &Lifecycle {
        &self.lc
    }

    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        self.create_sandbox(plan_id)
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let st = self.lc.lock();
        super::require_created(&self.lc, &st)?;
        let repo = self.repo(&st)?;
        self.locked(&repo, || self.diff_now(&repo))
    }

    fn check_commit(&self) -> Result<(), SandboxError> {
        let st = self.lc.lock();
        let repo = self.repo(&st)?;
        let msg = self.message(&st, None);
        self.locked(&repo, || self.plan_commit(&repo, &msg).map(|_| ()))
    }

    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError> {
        super::settle_on_panic(
            || self.commit_sandbox(message),
            || {
                let _ = self.settle_in_flight();
            },
        )
    }

    fn settle_in_flight(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.reconcile(&mut st)
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        self.rollback_sandbox()
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        self.cleanup_sandbox()
    }

    /// Checkpoints are commits under `refs/patchbox/checkpoints/` (see `checkpoint.rs`).
    fn checkpoints(&self) -> Checkpoints<'_> {
        Checkpoints::Native(self)
    }
}

impl NativeCheckpoints for GitWorktree {
    fn save(&self, id: &str) -> Result<(), SandboxError> {
        self.save_checkpoint(id)
    }

    fn restore(&self, id: &str) -> Result<(), SandboxError> {
        self.restore_checkpoint(id)
    }

    fn release(&self, id: &str) -> Result<(), SandboxError> {
        self.release_checkpoint(id)
    }
}

/// How the registry makes and reopens `git_worktree` backends (see [`builtins`](crate::plan::strategy::builtins)).
pub const FACTORY: FnFactory = FnFactory {
    new: |r| {
        Ok(Box::new(GitWorktree::new(
            r.env.clone(),
            r.plan_dir,
            r.resource_id,
            r.original,
        )))
    },
    open: |env, rec, dir| Ok(Box::new(GitWorktree::open(env.clone(), rec, dir)?)),
};
