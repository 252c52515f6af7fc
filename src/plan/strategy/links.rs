//! The one rule every strategy that commits files applies before it writes anything to the
//! original: a symlink the sandbox adds, or a path it turns into a symlink or retargets, must
//! point inside the resource. Otherwise the commit is refused with a
//! [`SandboxError::Commit`] that says so and names the links, and nothing is written; in
//! `commit_all` the check of every sandbox runs before the first write, so the whole plan is
//! refused. Symlinks pointing inside the resource are allowed.
//!
//! Where a link points is worked out as the kernel would resolve it in the original once the
//! commit is in: from the link's directory, one component at a time; `..` climbs one
//! directory and may not climb above the resource's root; a component that is a symlink (one
//! the sandbox adds or changes, else one in the original) is followed; an absolute target
//! must lie under the original's root (as recorded, or canonical) and goes on from there. So
//! `sub/l -> x/../..` is refused when `sub/x -> ..`: it leads above the root, though read as
//! text it stays inside. A loop of links leads nowhere, so it is not refused.
//!
//! Who checks: `copy_on_write` and `overlay` in [`super::through_apply`] (their check and
//! their commit), `git_worktree` when it plans its commit (its check and its commit). `none`
//! writes straight into the original, so there is nothing to refuse before the fact;
//! `transaction_rollback` has no files.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::id::SandboxId;
use crate::plan::error::SandboxError;
use crate::plan::model::DiffEntry;

/// git's mode of a symlink.
const SYMLINK: u32 = 0o120000;
/// How many symlinks one resolution follows (Linux's limit); past it, a loop.
const MAX_HOPS: usize = 40;
/// How many offending links the reason spells out (`files` names them all).
const SHOWN: usize = 8;

/// The symlinks among `entries` whose target leads outside the resource at `original`, as
/// (path, target), in the order of `entries`. Entries whose `after` side is not a symlink
/// are not checked; they still count when a resolution passes through their path.
pub(crate) fn links_out(original: &Path, entries: &[DiffEntry]) -> Vec<(String, String)> {
    let r = Resolver {
        original,
        roots: roots(original),
        changed: entries
            .iter()
            .map(|e| (e.path.as_str(), link_target(e)))
            .collect(),
    };
    entries
        .iter()
        .filter_map(|e| {
            let target = link_target(e)?;
            r.leads_out(&e.path, target)
                .then(|| (e.path.clone(), String::from_utf8_lossy(target).into_owned()))
        })
        .collect()
}

/// [`links_out`] as the refusal of a commit: a [`SandboxError::Commit`] of `sandbox_id` whose
/// reason says the links point outside the resource and whose `files` are their paths, as
/// `name` shows a resource-relative path (the identity, or the repository path).
pub(crate) fn refuse_links_out(
    sandbox_id: &SandboxId,
    original: &Path,
    entries: &[DiffEntry],
    name: impl Fn(&str) -> String,
) -> Result<(), SandboxError> {
    let out = links_out(original, entries);
    if out.is_empty() {
        return Ok(());
    }
    let mut shown: Vec<String> = out
        .iter()
        .take(SHOWN)
        .map(|(p, t)| format!("{} -> {t}", name(p)))
        .collect();
    if out.len() > SHOWN {
        shown.push(format!("and {} more", out.len() - SHOWN));
    }
    Err(SandboxError::Commit {
        sandbox_id: sandbox_id.to_string(),
        reason: format!(
            "a symlink points outside the resource ({}); nothing was written",
            shown.join(", ")
        ),
        files: out.iter().map(|(p, _)| name(p)).collect(),
        source: None,
    })
}

/// The target of `e` when its new side is a symlink.
fn link_target(e: &DiffEntry) -> Option<&[u8]> {
    match (e.after_mode, e.after.as_deref()) {
        (Some(SYMLINK), Some(t)) => Some(t),
        _ => None,
    }
}

/// The original's root as recorded and as the filesystem resolves it, lexically clean.
fn roots(original: &Path) -> Vec<PathBuf> {
    let mut out = vec![clean(original)];
    if let Ok(c) = std::fs::canonicalize(original) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// `p` with `.` dropped and `..` applied as text.
fn clean(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// The bytes of a `/`-separated path, one component each (empty ones and `.` kept for the
/// walk to skip).
fn parts(p: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    p.split(|&b| b == b'/')
}

struct Resolver<'a> {
    original: &'a Path,
    roots: Vec<PathBuf>,
    /// Every path the diff changes, with its new target when it is a symlink now.
    changed: HashMap<&'a str, Option<&'a [u8]>>,
}

impl Resolver<'_> {
    /// The target of the symlink at resource path `at` once the commit is in; `None` when
    /// it is not a symlink (or does not exist).
    fn link_at(&self, at: &[Vec<u8>]) -> Option<Vec<u8>> {
        let rel = at.join(&b'/');
        if let Ok(key) = std::str::from_utf8(&rel) {
            if let Some(t) = self.changed.get(key) {
                return t.map(<[u8]>::to_vec);
            }
        }
        let p = self.original.join(std::ffi::OsStr::from_bytes(&rel));
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => std::fs::read_link(&p)
                .ok()
                .map(|t| t.as_os_str().as_bytes().to_vec()),
            _ => None,
        }
    }

    /// Of an absolute target, the part below the original's root; `None` when it is not
    /// under it.
    fn below_root<'t>(&self, target: &'t [u8]) -> Option<Vec<&'t [u8]>> {
        let comps: Vec<&[u8]> = parts(target).collect();
        let mut at = PathBuf::from("/");
        for (i, c) in comps.iter().enumerate() {
            if self.roots.contains(&at) {
                return Some(comps[i..].to_vec());
            }
            match *c {
                b"" | b"." => {}
                b".." => {
                    at.pop();
                }
                name => at.push(std::ffi::OsStr::from_bytes(name)),
            }
        }
        self.roots.contains(&at).then(Vec::new)
    }

    /// Whether the symlink at resource path `link` with `target` leads outside the resource.
    fn leads_out(&self, link: &str, target: &[u8]) -> bool {
        let mut at: Vec<Vec<u8>> = parts(link.as_bytes())
            .filter(|c| !c.is_empty() && *c != b".")
            .map(<[u8]>::to_vec)
            .collect();
        at.pop();
        // The components still to walk, the next one last.
        let mut todo: Vec<Vec<u8>> = Vec::new();
        if !self.push_target(&mut at, &mut todo, target) {
            return true;
        }
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            match c.as_slice() {
                b"" | b"." => {}
                b".." => {
                    if at.pop().is_none() {
                        return true;
                    }
                }
                _ => {
                    at.push(c);
                    if let Some(next) = self.link_at(&at) {
                        hops += 1;
                        if hops > MAX_HOPS {
                            return false;
                        }
                        at.pop();
                        if !self.push_target(&mut at, &mut todo, &next) {
                            return true;
                        }
                    }
                }
            }
        }
        false
    }

    /// Queues `target`'s components to walk next from `at` (an absolute one from the root);
    /// `false` when it is absolute and not under the original's root.
    fn push_target(&self, at: &mut Vec<Vec<u8>>, todo: &mut Vec<Vec<u8>>, target: &[u8]) -> bool {
        if target.starts_with(b"/") {
            let Some(rest) = self.below_root(target) else {
                return false;
            };
            at.clear();
            todo.extend(rest.into_iter().rev().map(<[u8]>::to_vec));
        } else {
            todo.extend(parts(target).rev().map(<[u8]>::to_vec));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::DiffOp;

    fn link(path: &str, target: &str) -> DiffEntry {
        DiffEntry {
            path: path.into(),
            operation: DiffOp::Added,
            before: None,
            after: Some(target.as_bytes().to_vec()),
            before_mode: None,
            after_mode: Some(SYMLINK),
        }
    }

    fn out(original: &Path, entries: &[DiffEntry]) -> Vec<String> {
        links_out(original, entries)
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    #[test]
    fn relative_absolute_and_chained_targets() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("res");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        let abs_in = format!("{}/sub/../a", root.display());
        let abs_out = format!("{}/x", d.path().display());
        let abs_up = format!("{}/sub/../../x", root.display());
        let entries = [
            link("a", "sub/b"),
            link("sub/ok", "../a"),
            link("sub/up", "../../x"),
            link("abs-in", &abs_in),
            link("abs-out", &abs_out),
            link("abs-up", &abs_up),
            // Followed, not read as text: `hop` is the root, `deep` two levels down.
            link("sub/hop", ".."),
            link("sub/via-hop", "hop/a"),
            link("sub/above-hop", "hop/.."),
            link("sub/deep", "x/y"),
            link("below-deep", "sub/deep/../../.."),
            link("through-etc", "etc/passwd"),
            link("loop", "loop"),
            link("dangling", "no/such/file"),
        ];
        assert_eq!(
            out(&root, &entries),
            [
                "sub/up",
                "abs-out",
                "abs-up",
                "sub/above-hop",
                "through-etc"
            ]
        );
        let e =
            refuse_links_out(&SandboxId::new(), &root, &entries, |p| format!("r/{p}")).unwrap_err();
        assert!(e.to_string().contains("points outside the resource"), "{e}");
        assert!(matches!(e, SandboxError::Commit { ref files, .. } if files[0] == "r/sub/up"));
        // A changed path that is no longer a symlink is not followed.
        let mut not_a_link = link("etc", "");
        not_a_link.after_mode = Some(0o100644);
        assert!(out(&root, &[not_a_link, link("l", "etc/../x")]).is_empty());
    }
}
