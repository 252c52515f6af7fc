//! Staging and diffing: every non-ignored file of the resource's part of the worktree is
//! staged into `scratch.index` (`git add -A`, submodule pointers kept at the base), which is
//! compared with the base commit; the entries come from `git diff --raw`, their contents
//! from the blobs, and the patch is `git diff --binary`.
//!
//! The worktree's own index is never written: commit stages through the same scratch index.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::git::Git;
use super::raw::{is_zero_oid, parse_raw, read_blobs, RawEntry};
use super::repo::Repo;
use super::{GitWorktree, SCRATCH_INDEX};
use crate::plan::error::SandboxError;
use crate::plan::model::{DiffEntry, DiffOp, SandboxDiff};

impl GitWorktree {
    /// Stages the resource's part of the worktree into the scratch index (submodule
    /// pointers kept at the base) and returns the index path.
    pub(super) fn stage(&self, repo: &Repo) -> Result<PathBuf, String> {
        let index = self.lc.dir().join(SCRATCH_INDEX);
        let admin = Git::at(&repo.tree).line(&["rev-parse", "--absolute-git-dir"])?;
        let real = Path::new(&admin).join("index");
        let _ = std::fs::remove_file(&index);
        if real.exists() {
            std::fs::copy(&real, &index).map_err(|e| format!("copy {}: {e}", real.display()))?;
            // The copy keeps the index's mtime: git's racy-clean detection compares file
            // mtimes with it, and a newer copy would make a same-size edit made in the same
            // second as the checkout look unchanged.
            let mtime = std::fs::metadata(&real)
                .and_then(|m| m.modified())
                .map_err(|e| format!("stat {}: {e}", real.display()))?;
            std::fs::File::options()
                .write(true)
                .open(&index)
                .and_then(|f| f.set_modified(mtime))
                .map_err(|e| format!("set mtime of {}: {e}", index.display()))?;
        }
        let sub = repo.sub();
        let g = Git::at(&sub).index(&index);
        if !sub.exists() {
            // The actor removed the whole resource directory.
            Git::at(&repo.tree).index(&index).ok(&[
                "rm",
                "-r",
                "-q",
                "--cached",
                "--ignore-unmatch",
                "--",
                &repo.prefix,
            ])?;
        } else {
            g.ok(&["add", "-A", "--", "."])?;
        }
        let raw = Git::at(&repo.tree).index(&index).ok(&[
            "diff",
            "--cached",
            "--raw",
            "-z",
            "--no-abbrev",
            "--no-renames",
            "--ignore-submodules=none",
            &repo.base,
        ])?;
        let links: Vec<String> = parse_raw(&raw)
            .into_iter()
            .filter(RawEntry::is_gitlink)
            .map(|e| e.path)
            .collect();
        if !links.is_empty() {
            let mut args = vec!["reset", "-q", repo.base.as_str(), "--"];
            args.extend(links.iter().map(String::as_str));
            // `reset` exits 1 when it "unstaged" paths; only stderr tells a failure.
            let out = Git::at(&repo.tree).index(&index).run(&args)?;
            if !out.ok && !out.stderr.is_empty() {
                return Err(format!("git reset of submodule pointers: {}", out.stderr));
            }
        }
        Ok(index)
    }

    /// The entries of `git diff --raw` of the staged `index` against the base, submodule
    /// pointers left out, with paths relative to the resource.
    fn staged_raw(&self, repo: &Repo, index: &Path) -> Result<Vec<RawEntry>, String> {
        let sub = repo.sub();
        let dir = if sub.exists() { &sub } else { &repo.tree };
        let mut args = vec![
            "diff",
            "--cached",
            "--raw",
            "-z",
            "--no-abbrev",
            "--no-renames",
            "--ignore-submodules=all",
            &repo.base,
        ];
        args.extend_from_slice(&scope(repo));
        let raw = Git::at(dir).index(index).ok(&args)?;
        Ok(parse_raw(&raw)
            .into_iter()
            .filter(|e| !e.is_gitlink())
            .filter_map(|mut e| {
                if !sub.exists() {
                    e.path = repo.rel(&e.path)?.to_string();
                }
                Some(e)
            })
            .collect())
    }

    /// The staged changes (paths relative to the resource) with the content of the
    /// symlinks only — their targets, what the link check reads — without reading every
    /// changed blob.
    pub(super) fn staged_links(&self, repo: &Repo, index: &Path) -> Result<Vec<DiffEntry>, String> {
        let entries = self.staged_raw(repo, index)?;
        let oids: Vec<String> = entries
            .iter()
            .filter(|e| e.new_mode == SYMLINK && !is_zero_oid(&e.new_oid))
            .map(|e| e.new_oid.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let blobs = read_blobs(&repo.tree, &oids)?;
        Ok(entries
            .into_iter()
            .map(|e| DiffEntry {
                operation: op_of(e.status),
                before: None,
                after: (e.new_mode == SYMLINK)
                    .then(|| blobs.get(&e.new_oid).cloned())
                    .flatten(),
                before_mode: git_mode(&e.old_mode),
                after_mode: git_mode(&e.new_mode),
                path: e.path,
            })
            .collect())
    }

    /// The sandbox's changes against the base, paths relative to the resource; the caller
    /// holds the repository lock.
    pub(super) fn diff_now(&self, repo: &Repo) -> Result<SandboxDiff, SandboxError> {
        let index = self
            .stage(repo)
            .map_err(|e| self.err("stage the worktree", e))?;
        let entries = self
            .staged_raw(repo, &index)
            .map_err(|e| self.err("diff", e))?;
        let sub = repo.sub();
        let dir = if sub.exists() { &sub } else { &repo.tree };
        let g = Git::at(dir).index(&index);
        let mut patch_args = vec![
            "diff",
            "--cached",
            "--binary",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=all",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            &repo.base,
        ];
        patch_args.extend_from_slice(&scope(repo));
        let patch = g.ok(&patch_args).map_err(|e| self.err("diff", e))?;
        let oids: Vec<String> = entries
            .iter()
            .flat_map(|e| [e.old_oid.clone(), e.new_oid.clone()])
            .filter(|o| !is_zero_oid(o))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let blobs = read_blobs(&repo.tree, &oids).map_err(|e| self.err("read blobs", e))?;
        let mut out = Vec::new();
        for e in entries {
            let blob =
                |o: &str| (!is_zero_oid(o)).then(|| blobs.get(o).cloned().unwrap_or_default());
            out.push(DiffEntry {
                operation: op_of(e.status),
                before: blob(&e.old_oid),
                after: blob(&e.new_oid),
                before_mode: git_mode(&e.old_mode),
                after_mode: git_mode(&e.new_mode),
                path: e.path,
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(SandboxDiff {
            entries: out,
            patch,
        })
    }
}

/// The arguments that limit a diff to the resource: `--relative` run in its directory, or
/// its path when the actor removed the directory.
fn scope(repo: &Repo) -> Vec<&str> {
    if repo.sub().exists() {
        vec!["--relative"]
    } else {
        vec!["--", &repo.prefix]
    }
}

/// The `--raw` mode of a symlink.
const SYMLINK: &str = "120000";

/// The operation of a `--raw` status letter.
fn op_of(status: char) -> DiffOp {
    match status {
        'A' => DiffOp::Added,
        'D' => DiffOp::Deleted,
        _ => DiffOp::Modified,
    }
}

/// A `--raw` mode field as a number; none for `000000` (the side does not exist).
fn git_mode(m: &str) -> Option<u32> {
    u32::from_str_radix(m, 8).ok().filter(|&m| m != 0)
}
