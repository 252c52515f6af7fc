//! Rollback. From `Active`: `git reset --hard <base>` and `git clean -fdx` in the worktree
//! only. From `Committed`: a revert commit whose tree is the branch tip with the committed
//! paths set back to the target's first parent, reached by fast-forward like a commit;
//! refused, naming the files, when the branch or the user's tree changed them since.
//!
//! The user's branch is never moved backwards. The revert's id is recorded
//! (`git.revert_in_flight`) before the branch is touched, so a reopen after a crash can
//! settle it.

use std::collections::BTreeSet;

use super::git::{commit_tree, identity_args, Git};
use super::raw::{is_zero_oid, parse_raw};
use super::{GitWorktree, REVERT_IN_FLIGHT, SCRATCH_INDEX};
use crate::plan::error::SandboxError;
use crate::plan::record::State;
use crate::plan::status::Status;

impl GitWorktree {
    /// [`Sandbox::rollback`](crate::plan::sandbox::Sandbox::rollback).
    pub(super) fn rollback_sandbox(&self) -> Result<(), SandboxError> {
        let mut st = self.op()?;
        match st.status {
            Status::Committed => self.undo_commit(&mut st),
            _ => {
                self.lc.check(st.status, Status::RolledBack)?;
                let repo = self.repo(&st)?;
                self.locked(&repo, || {
                    let g = Git::at(&repo.tree);
                    g.ok(&["reset", "-q", "--hard", &repo.base])
                        .and_then(|_| g.ok(&["clean", "-q", "-f", "-d", "-x"]))
                        .map(|_| ())
                        .map_err(|e| {
                            self.lc
                                .rollback_error(format!("cannot reset the worktree: {e}"), vec![])
                        })
                })?;
                self.lc.advance(&mut st, Status::RolledBack)
            }
        }
    }

    fn set_revert_in_flight(&self, st: &mut State, v: Option<String>) -> Result<(), SandboxError> {
        if let Some(r) = st.record.as_mut() {
            match v {
                Some(v) => r.metadata.insert(REVERT_IN_FLIGHT.into(), v),
                None => r.metadata.remove(REVERT_IN_FLIGHT),
            };
        }
        self.lc.persist(st)
    }

    /// Reverts the committed target on the user's branch by a fast-forwarded revert commit.
    fn undo_commit(&self, st: &mut State) -> Result<(), SandboxError> {
        let repo = self.repo(st)?;
        let Some(x) = st.record.as_ref().and_then(|r| r.commit_ref.clone()) else {
            if let Some(r) = st.record.as_mut() {
                r.commit_ref = None;
            }
            return self.lc.advance(st, Status::RolledBack);
        };
        self.locked(&repo, || {
            let fail = |e: String| self.lc.rollback_error(e, vec![]);
            let (_, tip) = repo.user_branch().map_err(fail)?;
            let parent = Git::at(&repo.top)
                .line(&["rev-parse", "--verify", &format!("{x}^1")])
                .map_err(fail)?;
            let paths = repo.touched(&parent, &x).map_err(fail)?;
            let touched: BTreeSet<&String> = paths.iter().collect();
            let changed: Vec<String> = repo
                .touched(&x, &tip)
                .map_err(fail)?
                .into_iter()
                .filter(|p| touched.contains(p))
                .collect();
            if !changed.is_empty() {
                return Err(self.lc.rollback_error(
                    format!("the user's branch changed files of commit {x} since"),
                    changed,
                ));
            }
            let dirty = repo.dirty(&tip, &paths).map_err(fail)?;
            if !dirty.is_empty() {
                return Err(self.lc.rollback_error(
                    format!("the user's tree has uncommitted changes in files of commit {x}"),
                    dirty,
                ));
            }
            // The revert tree: the tip with the commit's paths as they were before it.
            let index = self.lc.dir().join(SCRATCH_INDEX);
            let _ = std::fs::remove_file(&index);
            let g = Git::at(&repo.top).index(&index);
            g.ok(&["read-tree", &tip]).map_err(fail)?;
            let raw = Git::at(&repo.top)
                .ok(&[
                    "diff-tree",
                    "-r",
                    "-z",
                    "--no-abbrev",
                    "--no-renames",
                    &x,
                    &parent,
                ])
                .map_err(fail)?;
            let mut info = Vec::new();
            for e in parse_raw(&raw) {
                let head = if is_zero_oid(&e.new_oid) {
                    format!("0 {} 0\t", e.old_oid)
                } else {
                    format!("{} {} 0\t", e.new_mode, e.new_oid)
                };
                info.extend_from_slice(head.as_bytes());
                info.extend_from_slice(&e.path_bytes);
                info.push(0);
            }
            g.input(&info)
                .ok(&["update-index", "-z", "--index-info"])
                .map_err(fail)?;
            let tree = g.line(&["write-tree"]).map_err(fail)?;
            let ident = identity_args(&repo.top);
            let msg = format!("Revert patchbox sandbox {} (commit {x})", self.lc.id());
            let revert = commit_tree(&repo.top, &ident, &tree, &[&tip], &msg).map_err(fail)?;
            // Recorded first, so a reopen after a crash learns whether the revert landed.
            self.set_revert_in_flight(st, Some(revert.clone()))?;
            let moved = self.fast_forward(&repo, &revert);
            if let Err(e) = moved {
                let _ = self.set_revert_in_flight(st, None);
                return Err(self.lc.rollback_error(
                    format!("the revert cannot be brought to the user's branch: {e}"),
                    paths.clone(),
                ));
            }
            Ok(())
        })?;
        if let Some(r) = st.record.as_mut() {
            r.metadata.remove(REVERT_IN_FLIGHT);
            r.commit_ref = None;
        }
        self.lc.advance(st, Status::RolledBack)
    }
}
