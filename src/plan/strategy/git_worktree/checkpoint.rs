//! Checkpoints as refs: a checkpoint of a `git_worktree` sandbox is a commit of its staged
//! state (the scratch index, on top of the base commit) kept under
//! `refs/patchbox/checkpoints/<sandbox>/<checkpoint>` — never a branch or a tag — and restoring
//! one is a two-tree `read-tree -m -u` from the state now to the checkpoint's tree, which
//! writes only the paths that differ. Cleanup deletes the sandbox's checkpoint refs.

use super::git::{commit_tree, identity_args, Git};
use super::repo::Repo;
use super::GitWorktree;
use crate::plan::error::SandboxError;
use crate::plan::strategy::require_created;

/// Where checkpoint refs live in the user's repository.
const REF_PREFIX: &str = "refs/patchbox/checkpoints";

impl GitWorktree {
    fn checkpoint_ref(&self, id: &str) -> String {
        format!("{REF_PREFIX}/{}/{id}", self.lc.id())
    }

    fn with_repo<R>(
        &self,
        f: impl FnOnce(&Repo) -> Result<R, SandboxError>,
    ) -> Result<R, SandboxError> {
        let st = self.lc.lock();
        require_created(&self.lc, &st)?;
        let repo = self.repo(&st)?;
        self.locked(&repo, || f(&repo))
    }

    /// Commits the sandbox's state as checkpoint `id`.
    pub(super) fn save_checkpoint(&self, id: &str) -> Result<(), SandboxError> {
        self.with_repo(|repo| {
            let index = self.stage(repo).map_err(|e| self.err("stage", e))?;
            let tree = Git::at(&repo.tree)
                .index(&index)
                .line(&["write-tree"])
                .map_err(|e| self.err("write-tree", e))?;
            let ident = identity_args(&repo.tree);
            let commit = commit_tree(
                &repo.tree,
                &ident,
                &tree,
                &[repo.base.as_str()],
                &format!("patchbox checkpoint {id}"),
            )
            .map_err(|e| self.err("commit-tree", e))?;
            Git::at(&repo.tree)
                .ok(&["update-ref", &self.checkpoint_ref(id), &commit])
                .map_err(|e| self.err("update-ref", e))?;
            Ok(())
        })
    }

    /// Makes the worktree's files those of checkpoint `id`.
    pub(super) fn restore_checkpoint(&self, id: &str) -> Result<(), SandboxError> {
        self.with_repo(|repo| {
            let target = format!("{}^{{tree}}", self.checkpoint_ref(id));
            let ck = Git::at(&repo.tree)
                .line(&["rev-parse", "--verify", "-q", &target])
                .map_err(|_| self.err("restore checkpoint", format!("no checkpoint {id}")))?;
            let index = self.stage(repo).map_err(|e| self.err("stage", e))?;
            let g = Git::at(&repo.tree).index(&index);
            let now = g
                .line(&["write-tree"])
                .map_err(|e| self.err("write-tree", e))?;
            // The scratch index equals `now` and the files match it: a two-tree merge moves
            // the worktree to the checkpoint, touching only the paths that differ.
            g.ok(&["read-tree", "-m", "-u", &now, &ck])
                .map_err(|e| self.err("read-tree", e))?;
            Ok(())
        })
    }

    /// Deletes checkpoint `id`'s ref.
    pub(super) fn release_checkpoint(&self, id: &str) -> Result<(), SandboxError> {
        self.with_repo(|repo| {
            Git::at(&repo.tree)
                .ok(&["update-ref", "-d", &self.checkpoint_ref(id)])
                .map(|_| ())
                .map_err(|e| self.err("update-ref -d", e))
        })
    }

    /// Deletes every checkpoint ref of the sandbox (cleanup; the caller holds the lock).
    pub(super) fn drop_checkpoint_refs(&self, repo: &Repo) -> Vec<String> {
        let at = if repo.top.is_dir() {
            &repo.top
        } else {
            &repo.common
        };
        let prefix = format!("{REF_PREFIX}/{}/", self.lc.id());
        let listed = Git::at(at).ok(&["for-each-ref", "--format=%(refname)", &prefix]);
        let mut failed = Vec::new();
        match listed {
            Ok(out) => {
                for r in String::from_utf8_lossy(&out)
                    .lines()
                    .filter(|l| !l.is_empty())
                {
                    if let Err(e) = Git::at(at).ok(&["update-ref", "-d", r]) {
                        failed.push(format!("delete {r}: {e}"));
                    }
                }
            }
            Err(e) => failed.push(format!("list checkpoint refs: {e}")),
        }
        failed
    }
}
