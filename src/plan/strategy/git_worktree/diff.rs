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

    /// The sandbox's changes against the base, paths relative to the resource; the caller
    /// holds the repository lock.
    pub(super) fn diff_now(&self, repo: &Repo) -> Result<SandboxDiff, SandboxError> {
        let index = self
            .stage(repo)
            .map_err(|e| self.err("stage the worktree", e))?;
        let sub = repo.sub();
        let dir = if sub.exists() { &sub } else { &repo.tree };
        let g = Git::at(dir).index(&index);
        let scope: &[&str] = if sub.exists() {
            &["--relative"]
        } else {
            &["--", &repo.prefix]
        };
        let mut raw_args = vec![
            "diff",
            "--cached",
            "--raw",
            "-z",
            "--no-abbrev",
            "--no-renames",
            "--ignore-submodules=all",
            &repo.base,
        ];
        raw_args.extend_from_slice(scope);
        let raw = g.ok(&raw_args).map_err(|e| self.err("diff", e))?;
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
        patch_args.extend_from_slice(scope);
        let patch = g.ok(&patch_args).map_err(|e| self.err("diff", e))?;
        let entries: Vec<RawEntry> = parse_raw(&raw)
            .into_iter()
            .filter(|e| !e.is_gitlink())
            .collect();
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
            let path = if sub.exists() {
                e.path.clone()
            } else {
                match repo.rel(&e.path) {
                    Some(p) => p.to_string(),
                    None => continue,
                }
            };
            let blob =
                |o: &str| (!is_zero_oid(o)).then(|| blobs.get(o).cloned().unwrap_or_default());
            out.push(DiffEntry {
                path,
                operation: match e.status {
                    'A' => DiffOp::Added,
                    'D' => DiffOp::Deleted,
                    _ => DiffOp::Modified,
                },
                before: blob(&e.old_oid),
                after: blob(&e.new_oid),
                before_mode: git_mode(&e.old_mode),
                after_mode: git_mode(&e.new_mode),
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(SandboxDiff {
            entries: out,
            patch,
        })
    }
}

/// A `--raw` mode field as a number; none for `000000` (the side does not exist).
fn git_mode(m: &str) -> Option<u32> {
    u32::from_str_radix(m, 8).ok().filter(|&m| m != 0)
}
