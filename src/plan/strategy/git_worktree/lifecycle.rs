//! The worktree's life outside commit and rollback: making it (a linked worktree on a
//! branch of its own, with the original's checked-out submodules), removing it with its
//! branch at cleanup, and settling on reopen a commit or revert a crash interrupted.
//!
//! Creation and cleanup both run under the repository lock: `git worktree add/remove` and
//! `git branch -D` write to the user's common git dir.

use std::path::{Path, PathBuf};

use super::git::Git;
use super::repo::Repo;
use super::{GitWorktree, REVERT_IN_FLIGHT, TREE};
use crate::id::PlanId;
use crate::plan::error::SandboxError;
use crate::plan::model::{SandboxContext, Strategy};
use crate::plan::record::{Record, State};
use crate::plan::status::Status;
use crate::plan::strategy::{cleanup_dir, record_created, remove_dir};

impl GitWorktree {
    /// [`Sandbox::create`](crate::plan::sandbox::Sandbox::create): makes the worktree and
    /// records it; on any failure nothing is left behind.
    pub(super) fn create_sandbox(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.lc.check(st.status, Status::Created)?;
        match self.make(plan_id) {
            Ok(record) => record_created(&self.lc, &mut st, record, &self.resource_id, |st| {
                if let Ok(repo) = self.repo(st) {
                    self.discard_worktree(&repo);
                }
            }),
            Err(reason) => {
                let _ = remove_dir(self.lc.dir());
                Err(SandboxError::Creation {
                    resource_id: self.resource_id.clone(),
                    reason,
                    source: None,
                })
            }
        }
    }

    /// Finds the repository, adds the worktree and returns the record to keep.
    fn make(&self, plan_id: &PlanId) -> Result<Record, String> {
        let original = std::fs::canonicalize(&self.original)
            .map_err(|e| format!("{}: {e}", self.original.display()))?;
        let g = Git::at(&original);
        let inside = g.run(&["rev-parse", "--is-inside-work-tree"])?;
        if !inside.ok || inside.stdout.trim_ascii() != b"true" {
            return Err(format!(
                "{} is not inside a git work tree{}",
                original.display(),
                if inside.stderr.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", inside.stderr)
                }
            ));
        }
        let top = PathBuf::from(g.line(&["rev-parse", "--show-toplevel"])?);
        let top = std::fs::canonicalize(&top).map_err(|e| format!("{}: {e}", top.display()))?;
        let common =
            PathBuf::from(g.line(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?);
        let common = std::fs::canonicalize(&common).unwrap_or(common);
        let prefix = original
            .strip_prefix(&top)
            .map_err(|_| format!("{} is not under {}", original.display(), top.display()))?
            .to_str()
            .ok_or("the resource path is not UTF-8")?
            .to_string();
        let base = g
            .line(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .map_err(|_| format!("the repository at {} has no commit yet", top.display()))?;
        let original_branch = g.run(&["symbolic-ref", "-q", "HEAD"]).map(|o| {
            if o.ok {
                String::from_utf8_lossy(&o.stdout).trim().to_string()
            } else {
                String::new()
            }
        })?;
        let plan_dir = self.lc.dir().parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(plan_dir).map_err(|e| format!("{}: {e}", plan_dir.display()))?;
        let plan_real =
            std::fs::canonicalize(plan_dir).map_err(|e| format!("{}: {e}", plan_dir.display()))?;
        if plan_real.starts_with(&top) {
            return Err(format!(
                "the sandbox directory {} lies inside the user's work tree {}; choose a root outside it",
                plan_real.display(),
                top.display()
            ));
        }
        std::fs::create_dir(self.lc.dir())
            .map_err(|e| format!("{}: {e}", self.lc.dir().display()))?;
        let branch = format!("patchbox/{plan_id}/{}", self.lc.id());
        let repo = Repo {
            top,
            common,
            prefix,
            base,
            branch,
            original_branch,
            tree: plan_real.join(self.lc.id().as_str()).join(TREE),
        };
        let added = self.locked(&repo, || {
            let tree = repo.tree.to_string_lossy().into_owned();
            Git::at(&repo.top)
                .ok(&[
                    "worktree",
                    "add",
                    "--quiet",
                    "-b",
                    &repo.branch,
                    &tree,
                    &repo.base,
                ])
                .map_err(|e| self.err("add the worktree", e))?;
            self.init_submodules(&repo)
                .map_err(|e| self.err("initialise submodules", e))
        });
        if let Err(e) = added {
            self.discard_worktree(&repo);
            return Err(e.to_string());
        }
        let mut metadata = repo.metadata();
        metadata.insert("strategy".into(), "git_worktree".into());
        Ok(Record::new(
            self.lc.id(),
            plan_id,
            &self.resource_id,
            Strategy::GitWorktree,
            &original,
            &repo.sub(),
            metadata,
        ))
    }

    /// Initialises in the worktree the submodules checked out in the original, cloning from
    /// the original's checkouts (no network).
    fn init_submodules(&self, repo: &Repo) -> Result<(), String> {
        if !repo.top.join(".gitmodules").exists() {
            return Ok(());
        }
        let status = Git::at(&repo.top).ok(&["submodule", "status"])?;
        let name_out = Git::at(&repo.top).run(&[
            "config",
            "-f",
            ".gitmodules",
            "--get-regexp",
            r"^submodule\..*\.path$",
        ])?;
        let names = String::from_utf8_lossy(&name_out.stdout).into_owned();
        for line in String::from_utf8_lossy(&status).lines() {
            // " <oid> <path> (<describe>)"; '-' = not initialised.
            if line.starts_with('-') || line.len() < 2 {
                continue;
            }
            let Some(path) = line[1..].split(' ').nth(1) else {
                continue;
            };
            let name = names
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (v == path).then(|| {
                        k.trim_start_matches("submodule.")
                            .trim_end_matches(".path")
                            .to_string()
                    })
                })
                .unwrap_or_else(|| path.to_string());
            let url = repo.top.join(path).to_string_lossy().into_owned();
            Git::at(&repo.tree).ok(&[
                "-c",
                "protocol.file.allow=always",
                "-c",
                &format!("submodule.{name}.url={url}"),
                "submodule",
                "update",
                "--init",
                "--quiet",
                "--",
                path,
            ])?;
        }
        Ok(())
    }

    /// Removes, under the lock and ignoring failures, a worktree whose creation did not
    /// complete.
    fn discard_worktree(&self, repo: &Repo) {
        let _ = self.locked(repo, || {
            self.remove_worktree(repo);
            Ok(())
        });
    }

    /// Removes the worktree and its branch (best effort: each step runs even when an
    /// earlier one failed). Returns what failed.
    fn remove_worktree(&self, repo: &Repo) -> Vec<String> {
        let mut failed = Vec::new();
        // The user's work tree may be gone; the repository itself may be gone too (then
        // only the sandbox's files remain to remove).
        let at = if repo.top.is_dir() {
            &repo.top
        } else if repo.common.is_dir() {
            &repo.common
        } else {
            if let Err(e) = remove_dir(&repo.tree) {
                failed.push(e.to_string());
            }
            return failed;
        };
        let g = Git::at(at);
        let tree = repo.tree.to_string_lossy().into_owned();
        if repo.tree.exists() {
            if let Err(e) = g.ok(&["worktree", "remove", "--force", "--force", &tree]) {
                // Worktrees holding submodules cannot be removed by git: remove the files,
                // then prune the administrative entry.
                if let Err(e2) = remove_dir(&repo.tree) {
                    failed.push(format!("{e}; {e2}"));
                }
            }
        }
        if let Err(e) = g.ok(&["worktree", "prune"]) {
            failed.push(e);
        }
        let exists = g
            .run(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{}", repo.branch),
            ])
            .is_ok_and(|o| o.ok);
        if exists {
            if let Err(e) = g.ok(&["branch", "-D", "--quiet", &repo.branch]) {
                failed.push(e);
            }
        }
        failed
    }

    /// [`Sandbox::cleanup`](crate::plan::sandbox::Sandbox::cleanup): removes the worktree
    /// and its branch, then the sandbox directory.
    pub(super) fn cleanup_sandbox(&self) -> Result<(), SandboxError> {
        let mut st = self.op()?;
        let repo = match st.status {
            Status::Pending | Status::CleanedUp => None,
            _ => Some(self.repo(&st)?),
        };
        cleanup_dir(&self.lc, &mut st, || {
            let Some(repo) = repo else { return Ok(()) };
            let failed = self.locked(&repo, || {
                let mut failed = self.drop_checkpoint_refs(&repo);
                failed.extend(self.remove_worktree(&repo));
                Ok(failed)
            })?;
            if failed.is_empty() {
                Ok(())
            } else {
                Err(SandboxError::sandbox(
                    Some(self.lc.id().as_str()),
                    format!("cannot remove the worktree: {}", failed.join("; ")),
                ))
            }
        })
    }

    /// Settles, on reopen, a revert and a commit a crash interrupted: each landed when its
    /// target is on the user's branch.
    pub(super) fn reconcile(&self, st: &mut State) -> Result<(), SandboxError> {
        let revert = st
            .record
            .as_ref()
            .and_then(|r| r.metadata.get(REVERT_IN_FLIGHT).cloned());
        if let Some(revert) = revert {
            let repo = self.repo(st)?;
            let landed = repo.landed(&revert);
            if let Some(r) = st.record.as_mut() {
                r.metadata.remove(REVERT_IN_FLIGHT);
                if landed {
                    r.commit_ref = None;
                }
            }
            if landed && st.status == Status::Committed {
                self.lc.advance(st, Status::RolledBack)?;
            } else {
                self.lc.persist(st)?;
            }
        }
        let Some(target) = st.record.as_ref().and_then(|r| r.commit_in_flight.clone()) else {
            return Ok(());
        };
        let repo = self.repo(st)?;
        let landed = repo.landed(&target);
        let since = st
            .record
            .as_ref()
            .and_then(|r| r.metadata.get(super::settle::IN_FLIGHT_SINCE))
            .and_then(|s| s.parse().ok());
        // Under the plan's lock, taken by this operation: the commit's gits have exited.
        let done = self.locked(&repo, || {
            self.settle_repo(&repo, &target, landed, since)
                .map_err(|e| self.err("settle the interrupted commit", e))
        })?;
        if let Some(r) = st.record.as_mut() {
            r.commit_in_flight = None;
            r.metadata.remove(super::settle::IN_FLIGHT_SINCE);
            if !done.is_empty() {
                r.metadata
                    .insert(super::settle::RECOVERED.into(), done.join("\n"));
            }
            if landed {
                r.commit_ref = Some(target);
            }
        }
        if landed && st.status != Status::Committed {
            self.lc.advance(st, Status::Committed)
        } else {
            self.lc.persist(st)
        }
    }
}
