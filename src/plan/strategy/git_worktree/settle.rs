//! Settling a commit whose process died while its git was updating the user's repository.
//!
//! The caller holds the plan's lock, taken by itself: every git the dead commit started had
//! inherited that lock (see [`crate::plan::lock`]) and has therefore exited. What such a git
//! can leave behind, when it was killed itself (an OOM kill, a signal to its pid):
//! - lock files (`index.lock`, `HEAD.lock`, the branch's `.lock`, `packed-refs.lock`): each is
//!   removed only when it is proved abandoned — made during the commit (its time is not older
//!   than the commit's start) and no live process works in the repository (no process has its
//!   current directory in the work tree or the file open). The removal is recorded in the
//!   sandbox's metadata ([`RECOVERED`]).
//! - when the branch did not move: an index and files already updated (the fast-forward
//!   writes the index and the files before it moves the branch). The paths the commit
//!   changes that hold what the commit wrote are put back to the branch's tip in the index
//!   and the tree. They were clean when the commit started (the commit refuses otherwise),
//!   and a path the user changed since is left alone, so nothing of the user's is lost.
//!
//! The repository is then as git leaves it after a clean run: exactly before or exactly after.

use std::path::{Path, PathBuf};

use super::git::Git;
use super::repo::Repo;
use super::GitWorktree;

/// Metadata key: when the commit in flight started (Unix milliseconds).
pub(super) const IN_FLIGHT_SINCE: &str = "git.in_flight_since";

/// Metadata key: what the last settling of an interrupted commit did to the user's
/// repository (lock files removed, paths put back), for the user to read.
pub(super) const RECOVERED: &str = "git.recovered";

/// Git's lock files a fast-forward of `branch` can leave: in the worktree's git dir and in
/// the common dir.
fn lock_files(git_dir: &Path, common: &Path, branch: &str) -> Vec<PathBuf> {
    let mut out = vec![git_dir.join("index.lock"), git_dir.join("HEAD.lock")];
    out.push(git_dir.join("ORIG_HEAD.lock"));
    if !branch.is_empty() {
        out.push(common.join(format!("{branch}.lock")));
    }
    out.push(common.join("packed-refs.lock"));
    out
}

/// Whether a live process other than this one works in `top` (its current directory is
/// there) or has `file` open: then a lock file there may be its own.
fn someone_works_in(top: &Path, file: &Path) -> bool {
    let me = std::process::id().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        // Nothing can be proved without /proc: assume the worst.
        return true;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        if std::fs::read_link(p.path().join("cwd")).is_ok_and(|c| c.starts_with(top)) {
            return true;
        }
        if let Ok(fds) = std::fs::read_dir(p.path().join("fd")) {
            if fds
                .flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == file))
            {
                return true;
            }
        }
    }
    false
}

fn millis(t: std::time::SystemTime) -> u128 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

impl GitWorktree {
    /// Settles the user's repository after the commit to `target` was interrupted (see the
    /// module docs); `since`: when that commit started (Unix ms). Returns what was done, one
    /// line each, for [`RECOVERED`].
    pub(super) fn settle_repo(
        &self,
        repo: &Repo,
        target: &str,
        landed: bool,
        since: Option<u128>,
    ) -> Result<Vec<String>, String> {
        let mut done = Vec::new();
        let git_dir = PathBuf::from(Git::at(&repo.top).line(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
        ])?);
        for f in lock_files(&git_dir, &repo.common, &repo.original_branch) {
            let Ok(meta) = std::fs::symlink_metadata(&f) else {
                continue;
            };
            let made = meta.modified().map(millis).unwrap_or(0);
            // A second of slack for filesystems with coarse times.
            let during = since.is_some_and(|s| made + 1000 >= s);
            if !during || someone_works_in(&repo.top, &f) {
                done.push(format!(
                    "kept {}: it may belong to a live git (not proved abandoned)",
                    f.display()
                ));
                continue;
            }
            std::fs::remove_file(&f).map_err(|e| format!("remove {}: {e}", f.display()))?;
            done.push(format!(
                "removed {}: left by a git of this commit, which has exited",
                f.display()
            ));
        }
        if landed {
            return Ok(done);
        }
        // The branch did not move: what it points to is "before".
        let Ok((_, before)) = repo.user_branch() else {
            done.push("the user's branch cannot be read; nothing put back".into());
            return Ok(done);
        };
        let touched = repo.touched(&before, target)?;
        let dirty = repo.dirty(&before, &touched)?;
        // Only what the interrupted git wrote (the target's content) is put back: a path
        // that differs from the target too was changed by the user since.
        let theirs: std::collections::HashSet<String> = if dirty.is_empty() {
            Default::default()
        } else {
            let mut args = vec!["diff", "--name-only", "-z", "--no-renames", target, "--"];
            args.extend(dirty.iter().map(String::as_str));
            let out = Git::at(&repo.top).ok(&args)?;
            out.split(|&b| b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()
        };
        let dirty: Vec<String> = dirty.into_iter().filter(|p| !theirs.contains(p)).collect();
        if dirty.is_empty() {
            return Ok(done);
        }
        let kept = Git::at(&repo.top).ok(&["ls-tree", "-r", "-z", "--name-only", &before])?;
        let in_before: std::collections::HashSet<&[u8]> =
            kept.split(|&b| b == 0).filter(|p| !p.is_empty()).collect();
        let mut reset = vec!["reset", "-q", before.as_str(), "--"];
        reset.extend(dirty.iter().map(String::as_str));
        Git::at(&repo.top).ok(&reset)?;
        let (back, gone): (Vec<&String>, Vec<&String>) =
            dirty.iter().partition(|p| in_before.contains(p.as_bytes()));
        if !back.is_empty() {
            let mut checkout = vec!["checkout", "-q", before.as_str(), "--"];
            checkout.extend(back.iter().map(|s| s.as_str()));
            Git::at(&repo.top).ok(&checkout)?;
        }
        for p in gone {
            let f = repo.top.join(p);
            match std::fs::remove_file(&f) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("remove {}: {e}", f.display())),
            }
        }
        done.push(format!(
            "put back {} path(s) the interrupted fast-forward had written ({})",
            dirty.len(),
            dirty.join(", ")
        ));
        Ok(done)
    }
}
