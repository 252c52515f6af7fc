//! [`Repo`]: the facts about the resource's repository that a sandbox keeps in its record's
//! metadata (`git.repo`, `git.common_dir`, `git.prefix`, `git.base`, `git.branch`,
//! `git.original_branch`), their round trip through the record, and the read-only questions
//! the strategy asks the user's repository: the checked-out branch, the files two commits
//! differ in, the files dirty in the user's tree, and whether a commit is on the branch.
//!
//! Nothing here writes to the user's repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::git::Git;
use super::raw::nul_fields;
use super::TREE;
use crate::plan::error::SandboxError;
use crate::plan::record::Record;

/// Metadata key of [`Repo::top`].
const KEY_REPO: &str = "git.repo";
/// Metadata key of [`Repo::common`].
const KEY_COMMON_DIR: &str = "git.common_dir";
/// Metadata key of [`Repo::prefix`].
const KEY_PREFIX: &str = "git.prefix";
/// Metadata key of [`Repo::base`].
const KEY_BASE: &str = "git.base";
/// Metadata key of [`Repo::branch`].
const KEY_BRANCH: &str = "git.branch";
/// Metadata key of [`Repo::original_branch`].
const KEY_ORIGINAL_BRANCH: &str = "git.original_branch";

/// The repository facts a record keeps in its metadata.
pub(super) struct Repo {
    /// The user's work tree (top level).
    pub(super) top: PathBuf,
    /// The common git dir (the lock key).
    pub(super) common: PathBuf,
    /// The resource's path inside the repository ("" for the top level).
    pub(super) prefix: String,
    /// The start commit.
    pub(super) base: String,
    /// The sandbox branch (`patchbox/<plan>/<id>`).
    pub(super) branch: String,
    /// The user's branch (`refs/heads/…`), empty when `HEAD` was detached.
    pub(super) original_branch: String,
    /// The worktree.
    pub(super) tree: PathBuf,
}

impl Repo {
    /// The facts recorded by [`Repo::metadata`]; `dir` is the sandbox directory.
    pub(super) fn from_record(r: &Record, dir: &Path) -> Result<Repo, SandboxError> {
        let get = |k: &str| {
            r.metadata.get(k).cloned().ok_or_else(|| {
                SandboxError::sandbox(
                    Some(r.sandbox_id.as_str()),
                    format!("sandbox state lacks {k:?}"),
                )
            })
        };
        Ok(Repo {
            top: PathBuf::from(get(KEY_REPO)?),
            common: PathBuf::from(get(KEY_COMMON_DIR)?),
            prefix: get(KEY_PREFIX)?,
            base: get(KEY_BASE)?,
            branch: get(KEY_BRANCH)?,
            original_branch: get(KEY_ORIGINAL_BRANCH)?,
            tree: dir.join(TREE),
        })
    }

    /// The record metadata [`Repo::from_record`] reads back (the worktree is not recorded:
    /// it is always `<sandbox dir>/tree`).
    pub(super) fn metadata(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (KEY_REPO.into(), self.top.to_string_lossy().into_owned()),
            (
                KEY_COMMON_DIR.into(),
                self.common.to_string_lossy().into_owned(),
            ),
            (KEY_BRANCH.into(), self.branch.clone()),
            (KEY_BASE.into(), self.base.clone()),
            (KEY_PREFIX.into(), self.prefix.clone()),
            (KEY_ORIGINAL_BRANCH.into(), self.original_branch.clone()),
        ])
    }

    /// The resource's directory in the worktree.
    pub(super) fn sub(&self) -> PathBuf {
        if self.prefix.is_empty() {
            self.tree.clone()
        } else {
            self.tree.join(&self.prefix)
        }
    }

    /// A repository path relative to the resource (`None` outside it).
    pub(super) fn rel<'p>(&self, path: &'p str) -> Option<&'p str> {
        if self.prefix.is_empty() {
            Some(path)
        } else {
            path.strip_prefix(self.prefix.as_str())
                .and_then(|p| p.strip_prefix('/'))
        }
    }

    /// The repository path of `rel`, a path relative to the resource (see [`Repo::rel`]).
    pub(super) fn repo_path(&self, rel: &str) -> String {
        if self.prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.prefix)
        }
    }

    /// Whether `commit` is on the user's branch.
    pub(super) fn landed(&self, commit: &str) -> bool {
        !self.original_branch.is_empty()
            && Git::at(&self.top)
                .run(&["merge-base", "--is-ancestor", commit, &self.original_branch])
                .is_ok_and(|o| o.ok)
    }

    /// The user's branch, checked: still checked out in the original and not detached.
    pub(super) fn user_branch(&self) -> Result<(String, String), String> {
        if self.original_branch.is_empty() {
            return Err(format!(
                "the original's HEAD was detached when the sandbox was made; git_worktree commits onto a branch (check one out in {} and make a new sandbox)",
                self.top.display()
            ));
        }
        let now = Git::at(&self.top)
            .run(&["symbolic-ref", "-q", "HEAD"])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())?;
        if now != self.original_branch {
            return Err(format!(
                "the original's HEAD is now {} (was {}); switch back to commit",
                if now.is_empty() { "detached" } else { &now },
                self.original_branch
            ));
        }
        let tip = Git::at(&self.top).line(&[
            "rev-parse",
            "--verify",
            &format!("{}^{{commit}}", self.original_branch),
        ])?;
        Ok((self.original_branch.clone(), tip))
    }

    /// Files changed between `from` and `to` (repository paths).
    pub(super) fn touched(&self, from: &str, to: &str) -> Result<Vec<String>, String> {
        let out = Git::at(&self.top).ok(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-only",
            from,
            to,
        ])?;
        Ok(nul_fields(&out))
    }

    /// Of `paths`, those dirty in the user's tree: modified, staged, untracked, or present
    /// (even ignored) where `tip` has nothing.
    pub(super) fn dirty(&self, tip: &str, paths: &[String]) -> Result<Vec<String>, String> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let status = Git::at(&self.top).ok(&[
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--ignore-submodules=all",
        ])?;
        let dirty: BTreeSet<String> = nul_fields(&status)
            .into_iter()
            .filter_map(|e| e.get(3..).map(str::to_string))
            .collect();
        let in_tip: BTreeSet<String> =
            nul_fields(&Git::at(&self.top).ok(&["ls-tree", "-r", "-z", "--name-only", tip])?)
                .into_iter()
                .collect();
        let mut out: Vec<String> = paths
            .iter()
            .filter(|p| {
                dirty.contains(*p)
                    || (!in_tip.contains(*p) && std::fs::symlink_metadata(self.top.join(p)).is_ok())
            })
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
}
