//! Patch generation: `git diff` between a tree and its edited copy in a scratch repository
//! (several diff options), or this crate's own writer.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use patchbox::patch::write::{write_file_diff, Side};
use patchbox::RelPath;

use super::git::git_ok;
use super::tree::{clear_dir, write_tree, Node, Tree};
use super::OUTSIDE;

/// A scratch repository for `git diff`.
pub struct DiffRepo {
    pub repo: PathBuf,
    pub home: PathBuf,
}

pub(super) const DIFF_ARGS: &[&[&str]] = &[
    &[],
    &["-M"],
    &["-M", "-U1"],
    &["-C", "--find-copies-harder"],
    &["--no-renames"],
    &["-U0"],
    &["-U5", "-M"],
    &["--full-index", "-M"],
    &["-B", "-M"],
    &["--diff-algorithm=patience"],
    &["--src-prefix=s/", "--dst-prefix=t/"],
    &["--text"],
];

impl DiffRepo {
    pub fn new(scratch: &Path) -> DiffRepo {
        let repo = scratch.join("repo");
        let home = scratch.join("home");
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&home).unwrap();
        git_ok(&repo, &home, &["init", "-q", "."]);
        DiffRepo { repo, home }
    }

    /// `git diff --cached --binary <args>` from `base` to `head`.
    pub fn diff(&self, base: &Tree, head: &Tree, args: &[&str]) -> Vec<u8> {
        let (r, h) = (&self.repo, &self.home);
        let outside = Path::new("/nonexistent-patchbox-fuzz/outside");
        clear_dir(r, true);
        write_tree(r, base, outside);
        git_ok(r, h, &["add", "-A"]);
        let tree = git_ok(r, h, &["write-tree"]);
        let tree = String::from_utf8(tree).unwrap().trim().to_string();
        clear_dir(r, true);
        write_tree(r, head, outside);
        git_ok(r, h, &["add", "-A"]);
        let mut a = vec!["diff", "--cached", "--binary"];
        a.extend_from_slice(args);
        a.push(&tree);
        let out = git_ok(r, h, &a);
        // Put back the placeholder in absolute link targets.
        replace_all(&out, outside.as_os_str().as_bytes(), OUTSIDE.as_bytes())
    }
}

pub(super) fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

fn side<'a>(p: &'a RelPath, n: &'a Node) -> Side<'a> {
    match n {
        Node::File { data, exec } => Side {
            path: p,
            mode: if *exec { 0o100755 } else { 0o100644 },
            data,
        },
        Node::Link(t) => Side {
            path: p,
            mode: 0o120000,
            data: t,
        },
    }
}

/// The patch `patchbox::patch::write` writes for `base` → `head`, in path order.
pub fn writer_patch(base: &Tree, head: &Tree) -> Vec<u8> {
    let keys: BTreeSet<&String> = base.keys().chain(head.keys()).collect();
    let mut out = Vec::new();
    // Deletions first, so that a file → directory swap applies in order.
    for pass in 0..2 {
        for k in &keys {
            let Ok(p) = RelPath::new(k.as_str()) else {
                continue;
            };
            let (old, new) = (base.get(*k), head.get(*k));
            let deletion = new.is_none();
            if (pass == 0) != deletion {
                continue;
            }
            write_file_diff(&mut out, old.map(|n| side(&p, n)), new.map(|n| side(&p, n)));
        }
    }
    out
}
