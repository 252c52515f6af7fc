//! The diff of a `copy_on_write` or `overlay` sandbox's files against its base (the stable
//! snapshot it starts from, [`crate::isolation::tree_base`]), and the reset of a copy back
//! to it.

use std::path::Path;

use crate::error::Result;
use crate::fs::state_dir::{self, StatePath};
use crate::fs::RelPath;
use crate::git::ignore::IgnoreRules;
use crate::git::repo::discover_repo;
use crate::plan::model::{DiffEntry, DiffOp, SandboxDiff};
use crate::tree::diff::{self, BaseSource, Change, Manifest};
use crate::tree::snapshot::{self, Node, StatKey};

use crate::isolation::tree_base::manifest_of;
pub use crate::isolation::tree_base::{copy_by_snapshot, copy_into, copy_to, load, take, TreeBase};

/// The ignore rules for new paths of a sandbox rooted at `tree` whose original is
/// `original`: a build's output in the sandbox is not part of its changes.
pub fn ignore_rules(tree: &Path, original: &Path) -> Result<IgnoreRules> {
    let repo = discover_repo(original)?;
    IgnoreRules::load(tree, repo.as_ref())
}

/// The changes of the files in `head` (a listing of `head_dir`) against the base; new
/// paths `is_ignored` accepts are left out.
pub fn changes(
    base: &TreeBase,
    head_dir: &Path,
    head: &[(Node, StatKey)],
    manifest: Option<&Manifest>,
    is_ignored: &dyn Fn(&RelPath) -> bool,
) -> Result<Vec<Change>> {
    let d = diff::diff_listing(&base.nodes, base, head_dir, head, manifest, is_ignored)?;
    Ok(d.changes)
}

/// The per-file entries of `changes`, and with `with_patch` their patch (the line diffs
/// are most of the cost: checkpoints do without).
pub fn render(
    base: &TreeBase,
    head_dir: &Path,
    changes: &[Change],
    with_patch: bool,
) -> Result<SandboxDiff> {
    let mut entries = Vec::with_capacity(changes.len());
    let mut patch = Vec::new();
    for c in changes {
        let before = match (c.base_index, c.old) {
            (Some(i), Some(_)) => Some(base.read(i)?),
            _ => None,
        };
        let after = match c.new {
            Some(k) => Some(diff::read_node(&head_dir.join(c.rel.as_path()), k)?),
            None => None,
        };
        // The patch is written from the same reads as the entries: each file is read once,
        // and the patch and the entries cannot disagree.
        if with_patch {
            diff::write_change(&mut patch, base, c, before.as_deref(), after.as_deref());
        }
        let operation = match (&before, &after) {
            (None, _) => DiffOp::Added,
            (_, None) => DiffOp::Deleted,
            _ => DiffOp::Modified,
        };
        entries.push(DiffEntry {
            path: c.rel.as_path().to_string_lossy().into_owned(),
            operation,
            before,
            after,
            before_mode: c.old.map(|k| k.git_mode()),
            after_mode: c.new.map(|k| k.git_mode()),
        });
    }
    Ok(SandboxDiff { entries, patch })
}

/// Makes the files of `tree` (a copy of the base) equal to the base again: every changed
/// path is removed and the base's node copied back. Returns a fresh manifest of `tree`.
/// Writes only inside `tree`, through the session chokepoint.
pub fn reset(
    base: &TreeBase,
    tree: &StatePath,
    changes: &[Change],
    marker: &StatePath,
) -> Result<Manifest> {
    let mut emptied: Vec<RelPath> = Vec::new();
    for c in changes.iter().filter(|c| c.new.is_some()) {
        state_dir::remove_file(&tree.child(&c.rel))?;
        let mut p = c.rel.parent();
        while let Some(d) = p {
            p = d.parent();
            emptied.push(d);
        }
    }
    // Deepest first, so a directory that replaced a base file is gone before the file
    // comes back.
    emptied.sort_by(|a, b| b.as_bytes().len().cmp(&a.as_bytes().len()).then(b.cmp(a)));
    emptied.dedup();
    for d in &emptied {
        state_dir::remove_empty_dir(&tree.child(d))?;
    }
    let restore: Vec<&Node> = changes
        .iter()
        .filter_map(|c| c.base_index.filter(|_| c.old.is_some()))
        .map(|i| &base.nodes[i])
        .collect();
    for n in &restore {
        // A directory the sandbox made where the base has a file, now empty.
        state_dir::remove_empty_dir(&tree.child(&n.rel))?;
    }
    base.copy_nodes(&restore, tree)?;
    let listing = snapshot::list_tree(tree.as_path())?;
    let nodes: Vec<Node> = listing.iter().map(|(n, _)| n.clone()).collect();
    let keys: Vec<Option<StatKey>> = listing.iter().map(|(_, k)| Some(*k)).collect();
    // Every node is the base's now: restored ones were just copied, the others were
    // unchanged (not in `changes`).
    manifest_of(&nodes, &keys, marker)
}
