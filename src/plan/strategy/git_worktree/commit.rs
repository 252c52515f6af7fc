//! Commit: the staged tree becomes a commit `C` (parent: the base) on the sandbox branch;
//! the user's branch reaches `C` — or, when it moved, a merge of its tip and `C` computed by
//! `git merge-tree --write-tree` — by `git merge --ff-only` only, after the files the target
//! changes were checked clean in the user's tree. The target is recorded as in flight before
//! the user's branch is touched, so a reopen after a crash can settle it.
//!
//! [`GitWorktree::plan_commit`] writes only objects; the refusals (a symlink pointing outside
//! the resource, conflict, dirty files, detached or switched branch) all happen there, before
//! anything the user sees changes.
//! The fast-forward is shared with the revert of a rollback.

use super::git::{commit_tree, identity_args, Git};
use super::repo::Repo;
use super::GitWorktree;
use crate::plan::error::SandboxError;
use crate::plan::model::CommitResult;
use crate::plan::record::State;
use crate::plan::status::Status;

/// Where a commit would go, computed without writing to the user's tree or refs.
pub(super) struct Plan {
    /// The sandbox's commit (parent: the base); `None` when there is nothing to commit.
    commit: Option<String>,
    /// What the user's branch fast-forwards to.
    target: Option<String>,
}

impl GitWorktree {
    /// [`Sandbox::commit`](crate::plan::sandbox::Sandbox::commit): commits the worktree on
    /// the sandbox branch and fast-forwards the user's branch to the target.
    pub(super) fn commit_sandbox(
        &self,
        message: Option<&str>,
    ) -> Result<CommitResult, SandboxError> {
        let mut st = self.op()?;
        if st.status == Status::Created {
            self.lc.advance(&mut st, Status::Active)?;
        }
        self.lc.check(st.status, Status::Committed)?;
        let repo = self.repo(&st)?;
        let msg = self.message(&st, message);
        let (diff, plan) = self.locked(&repo, || {
            let diff = self.diff_now(&repo)?;
            let plan = self.plan_commit(&repo, &msg)?;
            let (Some(commit), Some(target)) = (plan.commit.as_ref(), plan.target.as_ref())
            else {
                return Ok((diff, plan));
            };
            // The sandbox branch holds the commit; its index follows (files untouched).
            Git::at(&repo.tree)
                .ok(&["reset", "-q", commit])
                .map_err(|e| self.lc.commit_error(e, vec![]))?;
            if let Some(r) = st.record.as_mut() {
                r.commit_in_flight = Some(target.clone());
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0);
                r.metadata
                    .insert(super::settle::IN_FLIGHT_SINCE.into(), now.to_string());
            }
            self.lc.persist(&st)?;
            if let Err(e) = self.fast_forward(&repo, target) {
                if let Some(r) = st.record.as_mut() {
                    r.commit_in_flight = None;
                    r.metadata.remove(super::settle::IN_FLIGHT_SINCE);
                }
                let _ = self.lc.persist(&st);
                return Err(self.lc.commit_error(
                    format!("the commit cannot be brought to the user's branch; nothing was changed: {e}"),
                    vec![],
                ));
            }
            Ok((diff, plan))
        })?;
        if plan.target.is_some() {
            self.lc.landed();
        }
        if let Some(r) = st.record.as_mut() {
            r.commit_in_flight = None;
            r.metadata.remove(super::settle::IN_FLIGHT_SINCE);
            r.commit_ref = plan.target.clone();
        }
        self.lc.advance_committed(&mut st, plan.target.is_some())?;
        let mut result =
            crate::plan::strategy::through_apply::result(self.lc.id(), plan.target.clone(), &diff);
        result
            .metadata
            .insert("git.branch".into(), repo.branch.clone());
        if let Some(c) = plan.commit {
            result.metadata.insert("git.commit".into(), c);
        }
        Ok(result)
    }

    /// Computes the commit and its target; writes only objects.
    pub(super) fn plan_commit(&self, repo: &Repo, message: &str) -> Result<Plan, SandboxError> {
        let index = self.stage(repo).map_err(|e| {
            self.lc
                .commit_error(format!("cannot stage the worktree: {e}"), vec![])
        })?;
        let fail = |e: String| self.lc.commit_error(e, vec![]);
        // Before any object is written: a symlink leading out of the resource refuses.
        let links = self.staged_links(repo, &index).map_err(fail)?;
        crate::plan::strategy::links::refuse_links_out(
            self.lc.id(),
            &self.original,
            &links,
            |p| repo.repo_path(p),
        )?;
        let g = Git::at(&repo.tree).index(&index);
        let tree = g.line(&["write-tree"]).map_err(fail)?;
        let base_tree = Git::at(&repo.tree)
            .line(&["rev-parse", &format!("{}^{{tree}}", repo.base)])
            .map_err(fail)?;
        if tree == base_tree {
            return Ok(Plan {
                commit: None,
                target: None,
            });
        }
        let ident = identity_args(&repo.top);
        let commit =
            commit_tree(&repo.tree, &ident, &tree, &[&repo.base], message).map_err(fail)?;
        let (_, tip) = repo.user_branch().map_err(fail)?;
        let target = if tip == repo.base {
            commit.clone()
        } else {
            let out = Git::at(&repo.top)
                .run(&[
                    "merge-tree",
                    "--write-tree",
                    "--name-only",
                    "-z",
                    &tip,
                    &commit,
                ])
                .map_err(fail)?;
            let fields: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
            if !out.ok {
                if fields.len() > 1 && !out.stdout.is_empty() {
                    let mut files: Vec<String> = fields[1..]
                        .iter()
                        .take_while(|f| !f.is_empty())
                        .map(|f| String::from_utf8_lossy(f).into_owned())
                        .collect();
                    files.sort();
                    files.dedup();
                    return Err(self.lc.commit_error(
                        "the user's branch changed where the sandbox did (merge conflict); nothing was changed",
                        files,
                    ));
                }
                return Err(self.lc.commit_error(
                    format!(
                        "git merge-tree failed (git 2.38 or later is needed): {}",
                        out.stderr
                    ),
                    vec![],
                ));
            }
            let merged = fields
                .first()
                .map(|f| String::from_utf8_lossy(f).trim().to_string())
                .unwrap_or_default();
            let msg = format!("{message}\n\nMerge of sandbox branch {}", repo.branch);
            commit_tree(&repo.top, &ident, &merged, &[&tip, &commit], &msg).map_err(fail)?
        };
        let touched = repo.touched(&tip, &target).map_err(fail)?;
        let dirty = repo.dirty(&tip, &touched).map_err(fail)?;
        if !dirty.is_empty() {
            return Err(self.lc.commit_error(
                "the user's tree has uncommitted changes in files the commit changes; nothing was changed",
                dirty,
            ));
        }
        Ok(Plan {
            commit: Some(commit),
            target: Some(target),
        })
    }

    /// Fast-forwards the user's branch (with its index and files) to `target`.
    pub(super) fn fast_forward(&self, repo: &Repo, target: &str) -> Result<(), String> {
        Git::at(&repo.top)
            .ok(&[
                "-c",
                "merge.autoStash=false",
                "merge",
                "--ff-only",
                "--quiet",
                "--no-edit",
                target,
            ])
            .map(|_| ())
    }

    /// The commit message: `message`, or one naming the plan, resource and sandbox.
    pub(super) fn message(&self, st: &State, message: Option<&str>) -> String {
        let plan = st.record.as_ref().map(|r| r.plan_id.as_str()).unwrap_or("");
        message.map(str::to_string).unwrap_or_else(|| {
            format!(
                "patchbox: plan {plan}, resource {}, sandbox {}",
                self.resource_id,
                self.lc.id()
            )
        })
    }
}
