//! The stable snapshot a plan's `copy_on_write` or `overlay` sandbox starts from: a
//! project's selected files (what the session engine would snapshot: git's ignore rules, no
//! `.git`) as they were once, never written afterwards. It is at the same time the overlay's
//! lower layer, the pre-images the 3-way commit merges with, and what a rollback restores.
//!
//! A base is either one directory holding every file (a full copy, made with the snapshot
//! engine: reflinks where the filesystem shares blocks, else `copy_file_range`), or two
//! layers: a directory holding what differs from a shared lower layer of the project (see
//! [`super::shared_lower`]), over that layer. A node is then in the upper directory when it
//! is there, else in the shared layer: the upper directory holds no opaque directories, and
//! its whiteouts only stand where the base has no node.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::fs::state_dir::{self, StatePath};
use crate::fs::RelPath;
use crate::fs::Timestamp;
use crate::git::repo::GitRepo;
use crate::tree::diff::{self, BaseSource, Manifest};
use crate::tree::select::{self, Kind};
use crate::tree::snapshot::{self, Node, NodeKind, StatKey};

/// A base snapshot: its directory, the shared layer under it if any, and its nodes (sorted
/// by path bytes).
pub struct TreeBase {
    /// The `base/` directory (with a shared layer: what differs from it).
    pub dir: PathBuf,
    /// Every file and symlink of the base.
    pub nodes: Vec<Node>,
    /// The shared layer's files under `dir`, when the base is layered.
    pub under: Option<PathBuf>,
}

impl TreeBase {
    /// Where node `rel`'s content is: in `dir`, else (layered) in the shared layer.
    pub fn path_of(&self, rel: &Path) -> PathBuf {
        let top = self.dir.join(rel);
        match &self.under {
            Some(u) if std::fs::symlink_metadata(&top).is_err() => u.join(rel),
            _ => top,
        }
    }

    /// The directories to stack as the overlay's lower layers, top first.
    pub fn layers(&self) -> Vec<PathBuf> {
        let mut v = vec![self.dir.clone()];
        v.extend(self.under.clone());
        v
    }

    /// Copies `nodes` (nodes of this base, sorted by path) into `dst` from whichever layer
    /// holds each; returns each one's stat key in `dst` (`None`: not copied).
    pub fn copy_nodes(&self, nodes: &[&Node], dst: &StatePath) -> Result<Vec<Option<StatKey>>> {
        let Some(under) = &self.under else {
            return Ok(snapshot::copy_tree(&self.dir, nodes, dst, None, None)?.keys);
        };
        let (top, low): (Vec<usize>, Vec<usize>) = (0..nodes.len()).partition(|&i| {
            std::fs::symlink_metadata(self.dir.join(nodes[i].rel.as_path())).is_ok()
        });
        let pick = |idx: &[usize]| idx.iter().map(|&i| nodes[i]).collect::<Vec<&Node>>();
        let a = snapshot::copy_tree(&self.dir, &pick(&top), dst, None, None)?;
        let b = snapshot::copy_tree(under, &pick(&low), dst, None, None)?;
        let mut keys = vec![None; nodes.len()];
        for (i, k) in top.iter().zip(a.keys).chain(low.iter().zip(b.keys)) {
            keys[*i] = k;
        }
        Ok(keys)
    }
}

impl BaseSource for TreeBase {
    fn read(&self, i: usize) -> Result<Vec<u8>> {
        let n = &self.nodes[i];
        diff::read_node(&self.path_of(n.rel.as_path()), n.kind)
    }

    fn size(&self, i: usize) -> Option<u64> {
        let n = &self.nodes[i];
        std::fs::symlink_metadata(self.path_of(n.rel.as_path()))
            .ok()
            .map(|m| m.len())
    }
}

/// A selection's entry as a base node.
pub fn node_of(e: &select::Selected) -> Node {
    Node {
        rel: e.rel.clone(),
        kind: match e.kind {
            Kind::File { executable } => NodeKind::File { executable },
            Kind::Symlink => NodeKind::Symlink,
        },
    }
}

/// Copies the selected files of `original` into `dst` (which must not exist yet; made
/// here). `exclude` lists directories never entered (the library's own root when it lies
/// inside the resource). Returns the base and the repository the resource belongs to.
pub fn take(
    original: &Path,
    dst: &StatePath,
    exclude: &[PathBuf],
) -> Result<(TreeBase, Option<GitRepo>)> {
    let sel = select::select_project(original, exclude)?;
    let nodes: Vec<Node> = sel.entries.iter().map(node_of).collect();
    state_dir::create_dir_new(dst)?;
    Ok((copy_whole(original, nodes, dst)?, sel.git))
}

/// A base holding every one of `nodes`, copied from `original` into `dst` (made already);
/// a file that vanished while being copied is not in it.
pub fn copy_whole(original: &Path, nodes: Vec<Node>, dst: &StatePath) -> Result<TreeBase> {
    let out = snapshot::copy_tree(original, &nodes, dst, None, None)?;
    let nodes = nodes
        .into_iter()
        .zip(out.keys)
        .filter_map(|(n, k)| k.map(|_| n))
        .collect();
    Ok(TreeBase {
        dir: dst.as_path().to_path_buf(),
        nodes,
        under: None,
    })
}

/// Reads a base back from its directory (after the manager was reopened).
pub fn load(dir: &Path) -> Result<TreeBase> {
    let nodes = snapshot::list_tree(dir)?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    Ok(TreeBase {
        dir: dir.to_path_buf(),
        nodes,
        under: None,
    })
}

/// Copies the whole base into `dst` (made here) and returns the manifest of the copy, so
/// a later diff trusts unchanged stat data instead of reading every file.
pub fn copy_to(base: &TreeBase, dst: &StatePath, marker: &StatePath) -> Result<Manifest> {
    state_dir::create_dir_new(dst)?;
    copy_into(base, dst, marker)
}

/// [`copy_to`] into `dst`, an empty directory made by the caller (a Btrfs subvolume, so
/// that the copy's changes can later be learned from the filesystem: [`crate::fs::btrfs`]).
pub fn copy_into(base: &TreeBase, dst: &StatePath, marker: &StatePath) -> Result<Manifest> {
    let all: Vec<&Node> = base.nodes.iter().collect();
    let keys = base.copy_nodes(&all, dst)?;
    manifest_of(&base.nodes, &keys, marker)
}

/// [`copy_to`] without copying: `dst` is made a Btrfs snapshot (a copy of any size in one
/// transaction) of the base's directory, or of the shared layer a layered base stacks, in
/// which case the layer's files the base does not hold are removed and the base's own files
/// copied over them. `Ok(None)` when that cannot be done here (that directory is not a
/// subvolume on Btrfs, or this process is not root): nothing was made, and the caller
/// copies.
///
/// The manifest holds the snapshot's own stat data for the layer's files (a snapshot keeps
/// inode numbers and times), so a diff trusts them as it trusts copied ones.
pub fn copy_by_snapshot(
    base: &TreeBase,
    dst: &StatePath,
    marker: &StatePath,
) -> Result<Option<Manifest>> {
    let source = base.under.as_ref().unwrap_or(&base.dir);
    let (Some(parent), Some(name)) = (dst.as_path().parent(), dst.as_path().file_name()) else {
        return Ok(None);
    };
    let made = crate::fs::btrfs::snapshot_of(source, parent, name)
        .map_err(|e| crate::Error::io("snapshot the shared layer", dst.as_path(), e))?;
    if !made {
        return Ok(None);
    }
    // A layered base's own files: the few that differ from the layer (its whiteouts are
    // neither files nor symlinks, so the listing leaves them out).
    let top: std::collections::HashSet<Vec<u8>> = match &base.under {
        Some(_) => snapshot::list_tree(&base.dir)?
            .into_iter()
            .map(|(n, _)| n.rel.as_bytes().to_vec())
            .collect(),
        None => Default::default(),
    };
    let listed = snapshot::list_tree(dst.as_path())?;
    let mut keys: Vec<Option<StatKey>> = vec![None; base.nodes.len()];
    let mut from_top: Vec<usize> = Vec::new();
    let mut missing: Vec<usize> = Vec::new();
    // Directories of the layer's files that go: those left empty go too (a copy makes no
    // directory without a file below it, and the view must be what a copy would be).
    let mut emptied: std::collections::BTreeSet<RelPath> = Default::default();
    let mut gone = |rel: &RelPath| {
        let mut at = rel.parent();
        while let Some(d) = at {
            at = d.parent();
            if !emptied.insert(d) {
                break;
            }
        }
    };
    let mut li = 0usize;
    for (i, n) in base.nodes.iter().enumerate() {
        let rel = n.rel.as_bytes();
        // The layer's files before this node that the base does not hold go.
        while let Some((l, _)) = listed.get(li) {
            if l.rel.as_bytes() >= rel {
                break;
            }
            state_dir::remove_file(&dst.child(&l.rel))?;
            gone(&l.rel);
            li += 1;
        }
        let in_layer = listed
            .get(li)
            .filter(|(l, _)| l.rel.as_bytes() == rel)
            .map(|(l, k)| (l.kind, *k));
        if in_layer.is_some() {
            li += 1;
        }
        if top.contains(rel) {
            if in_layer.is_some() {
                state_dir::remove_file(&dst.child(&n.rel))?;
            }
            from_top.push(i);
        } else {
            match in_layer {
                Some((kind, k)) if kind == n.kind => keys[i] = Some(k),
                // Not in the layer as the base lists it: copied from the layer's file.
                Some(_) => {
                    state_dir::remove_file(&dst.child(&n.rel))?;
                    missing.push(i);
                }
                None => missing.push(i),
            }
        }
    }
    for (l, _) in &listed[li..] {
        state_dir::remove_file(&dst.child(&l.rel))?;
        gone(&l.rel);
    }
    // Its keys are taken: the listing goes before the manifest is built beside the keys.
    drop(listed);
    drop(top);
    // A directory of the layer where the base has a file is cleared first.
    for &i in from_top.iter().chain(&missing) {
        let p = dst.child(&base.nodes[i].rel);
        if std::fs::symlink_metadata(p.as_path()).is_ok_and(|m| m.is_dir()) {
            state_dir::remove_tree(&p)?;
        }
    }
    for (src, idx) in [(&base.dir, &from_top), (source, &missing)] {
        let nodes: Vec<&Node> = idx.iter().map(|&i| &base.nodes[i]).collect();
        let copied = snapshot::copy_tree(src, &nodes, dst, None, None)?;
        for (&i, k) in idx.iter().zip(copied.keys) {
            keys[i] = k;
        }
    }
    // Deepest first (a path sorts after its parent): a directory emptied by removing its
    // emptied subdirectories goes in the same pass. One holding a copied file stays.
    for d in emptied.iter().rev() {
        state_dir::remove_empty_dir(&dst.child(d))?;
    }
    manifest_of(&base.nodes, &keys, marker).map(Some)
}

/// The manifest of a copy of `nodes` whose stat keys are `keys` (`None`: not copied), with
/// a clock stamp taken after the newest of them.
pub fn manifest_of(
    nodes: &[Node],
    keys: &[Option<StatKey>],
    marker: &StatePath,
) -> Result<Manifest> {
    let mut newest = Timestamp::default();
    let entries: Vec<diff::ManifestEntry> = nodes
        .iter()
        .zip(keys)
        .filter_map(|(n, k)| {
            k.map(|key| {
                newest = newest.max(key.ctime);
                diff::ManifestEntry {
                    rel: n.rel.clone(),
                    key,
                    same_as_base: true,
                }
            })
        })
        .collect();
    let stamp = snapshot::clock_stamp_after(marker, newest)?;
    Ok(Manifest::new(entries, stamp))
}
