//! Snapshots over a project's shared lower layer (see [`super::shared_lower`]): the layer
//! holds the project's clean tracked files once, and each snapshot only what differs from
//! it — its other files (untracked, modified, symlinks), the tracked files the layer holds
//! differently, and whiteouts over the layer's files the snapshot lacks. Stacked, the two
//! show file for file (content, mode, mtime) what a full copy of the project would.
//!
//! Both faces build on it: a session's `.lower/`, and a plan's snapshot (its `overlay`
//! sandboxes' lower layers and pre-images). What a snapshot costs once the layer exists is
//! then the walk that finds what the project holds (one `lstat` per file, the git index
//! read) and copies of what differs, not a copy of the project.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::layer_digest::{Digester, LayerDigest};
use super::shared_lower::{self as shared, Manifest, ManifestFile, SharedLayer};
use super::tree_base::{copy_whole, node_of, TreeBase};
use crate::error::Result;
use crate::fs::path_hash::PathSet;
use crate::fs::state_dir::{self, StatePath};
use crate::fs::RelPath;
use crate::fs::Timestamp;
use crate::git::index::LStat;
use crate::git::repo::GitRepo;
use crate::tree::base::BaseSrc;
use crate::tree::select::{self, Selected};
use crate::tree::snapshot::{self, Node, NodeKind};

/// Projects with fewer clean tracked files than this snapshot whole: a shared layer saves
/// nothing worth its bookkeeping there.
pub const DEFAULT_MIN_FILES: usize = 2000;

/// Overrides [`DEFAULT_MIN_FILES`] (a number; `off` disables shared layers).
pub const MIN_FILES_ENV: &str = "PATCHBOX_SHARED_LOWER_MIN";

/// A shared layer is reused while the files a snapshot would have to hold beyond its own
/// copies stay under this share of the tracked files (over it, a new layer is made: the
/// project moved on).
pub const REUSE_MAX_SHARE: usize = 10;

/// The least number of clean tracked files for a shared layer, read from [`MIN_FILES_ENV`]
/// now (callers and tests may change it between two snapshots); `None`: disabled.
pub fn min_files() -> Option<usize> {
    match std::env::var(MIN_FILES_ENV) {
        Ok(v) if v == "off" => None,
        Ok(v) => Some(v.parse().unwrap_or(DEFAULT_MIN_FILES)),
        Err(_) => Some(DEFAULT_MIN_FILES),
    }
}

/// The blob nodes of a snapshot (indices of `srcs` that are [`BaseSrc::Blob`]) when the
/// snapshot of a git project (`git`) stands on a shared layer: enough of them
/// ([`min_files`]); `None` when it is taken whole. The one rule sessions and plans follow.
pub fn layered_blobs(git: bool, srcs: &[BaseSrc]) -> Option<Vec<usize>> {
    let min = min_files()?;
    if !git {
        return None;
    }
    let blobs: Vec<usize> = (0..srcs.len())
        .filter(|&i| matches!(srcs[i], BaseSrc::Blob(..)))
        .collect();
    (!blobs.is_empty() && blobs.len() >= min).then_some(blobs)
}

/// Where a selected file's snapshot content can come from: a blob of the index when its
/// stat data matches the index (by git's rule, racy entries excluded) and git does not
/// convert it, else the work tree (`Dir`).
pub fn source_of(e: &Selected, index_mtime: Option<Timestamp>) -> BaseSrc {
    match (&e.index, e.stat, index_mtime) {
        (Some(ix), Some(st), Some(t)) if !e.converted && ix.stat_matches(&st, t) => {
            BaseSrc::Blob(ix.oid, st)
        }
        _ => BaseSrc::Dir,
    }
}

/// The modification time of `repo`'s index, which [`source_of`] needs.
pub fn index_mtime(repo: Option<&GitRepo>) -> Option<Timestamp> {
    repo.and_then(|g| std::fs::metadata(&g.index_file).ok())
        .map(|m| Timestamp::mtime_of(&m))
}

/// A node's path as bytes.
pub fn rel_bytes(n: &Node) -> &[u8] {
    n.rel.as_path().as_os_str().as_bytes()
}

/// Whether the layer's file `f` is exactly the blob node `n` (same blob, mode and mtime).
pub fn served_by(f: Option<&ManifestFile>, n: &Node, s: &BaseSrc) -> bool {
    match (f, s) {
        (Some(f), BaseSrc::Blob(oid, st)) => {
            f.oid == *oid
                && f.mtime == st.mtime
                && matches!(n.kind, NodeKind::File { executable } if executable == f.executable)
        }
        _ => false,
    }
}

/// Where a snapshot's nodes are in a shared layer's manifest (computed once: the reuse check
/// and the snapshot both need it).
pub struct Placement {
    /// For each node, the index of the layer's file at its path, if any
    /// ([`Manifest::positions`]).
    pub at: Vec<Option<usize>>,
    /// The layer holds exactly the snapshot's blob nodes (its digest is theirs, see
    /// [`super::layer_digest`]): each is served by the layer, no whiteout is needed, and the
    /// manifest was not read.
    pub exact: bool,
}

impl Placement {
    /// Whether the layer serves node `i` (`n`, from `s`): read from `m`, the layer's
    /// manifest, unless the placement is exact.
    pub fn serves(&self, m: Option<&Manifest>, i: usize, n: &Node, s: &BaseSrc) -> bool {
        match (self.exact, self.at[i]) {
            (true, k) => k.is_some() && matches!(s, BaseSrc::Blob(..)),
            (false, Some(k)) => served_by(m.and_then(|m| m.files.get(k)), n, s),
            (false, None) => false,
        }
    }
}

/// A shared layer found reusable for a snapshot, with where the snapshot's nodes are in it.
pub struct Reused {
    /// The layer, held.
    pub layer: SharedLayer,
    /// Where each node is in the layer.
    pub at: Placement,
}

/// The digest a layer made of the blob nodes `blobs` would have ([`Manifest::digest`]);
/// `None` when one of them is not a regular file (no layer holds it as such).
pub fn digest_of(nodes: &[Node], srcs: &[BaseSrc], blobs: &[usize]) -> Option<LayerDigest> {
    let mut d = Digester::new();
    for &i in blobs {
        let (BaseSrc::Blob(oid, st), NodeKind::File { executable }) = (&srcs[i], nodes[i].kind)
        else {
            return None;
        };
        d.add(rel_bytes(&nodes[i]), executable, oid, st.mtime);
    }
    Some(d.finish())
}

/// The newest layer of `project` if it still serves a snapshot (`nodes`, their `srcs`, the
/// indices of its blob nodes) well enough (see [`REUSE_MAX_SHARE`]); an outgrown one is let
/// go (its hold with it), so the sweep after a new one is made can remove it. When the
/// layer's digest is the blob nodes' own (the project's clean tracked files are what they
/// were when it was made: the usual later session) its manifest is not read at all.
/// `digest`: the blob nodes' [`digest_of`], when the caller took it already.
pub fn reusable(
    root: &Path,
    project: &Path,
    (nodes, srcs, blobs): (&[Node], &[BaseSrc], &[usize]),
    digest: Option<LayerDigest>,
) -> Result<Option<Reused>> {
    let Some(layer) = shared::newest(root, project)? else {
        return Ok(None);
    };
    let digest = digest.or_else(|| digest_of(nodes, srcs, blobs));
    if digest.is_some_and(|d| layer.has_digest(&d)) {
        let mut at = vec![None; nodes.len()];
        for (k, &i) in blobs.iter().enumerate() {
            at[i] = Some(k);
        }
        let at = Placement { at, exact: true };
        return Ok(Some(Reused { layer, at }));
    }
    // A layer made before digests gets one now, for the next snapshot.
    let _ = layer.digest();
    // A manifest that cannot be read: a new layer is made rather than trusting this one.
    let Ok(m) = layer.manifest() else {
        return Ok(None);
    };
    let at = m.positions(nodes.iter().map(rel_bytes));
    let missed = blobs
        .iter()
        .filter(|&&i| !served_by(at[i].map(|k| &m.files[k]), &nodes[i], &srcs[i]))
        .count();
    let at = Placement { at, exact: false };
    Ok((missed <= blobs.len() / REUSE_MAX_SHARE).then_some(Reused { layer, at }))
}

/// The manifest of the blob nodes `blobs` written into a layer (`copied[k]`: whether
/// `blobs[k]` was).
pub fn manifest_of(nodes: &[Node], srcs: &[BaseSrc], blobs: &[usize], copied: &[bool]) -> Manifest {
    let files = blobs
        .iter()
        .zip(copied)
        .filter(|(_, c)| **c)
        .filter_map(|(&i, _)| match srcs[i] {
            BaseSrc::Blob(oid, st) => Some(ManifestFile {
                path: rel_bytes(&nodes[i]).to_vec(),
                executable: matches!(nodes[i].kind, NodeKind::File { executable: true }),
                oid,
                mtime: st.mtime,
            }),
            BaseSrc::Dir => None,
        })
        .collect();
    Manifest { files }
}

/// Whiteouts in `tmp` over the layer's files that are not among `nodes`: at the shallowest
/// path of each that the snapshot has nothing at (a whole directory the user removed is one
/// whiteout); nothing where a snapshot file already covers the path.
pub fn whiteouts(nodes: &[Node], m: &Manifest, tmp: &StatePath) -> Result<()> {
    if every_file_kept(nodes, m) {
        return Ok(());
    }
    let files: PathSet = nodes.iter().map(rel_bytes).collect();
    let mut dirs = PathSet::default();
    for n in nodes {
        let p = rel_bytes(n);
        for (i, b) in p.iter().enumerate() {
            if *b == b'/' {
                dirs.insert(&p[..i]);
            }
        }
    }
    let mut done = PathSet::default();
    for f in &m.files {
        let p = f.path.as_slice();
        if files.contains(p) || dirs.contains(p) {
            // The snapshot has something there: it hides the layer's file.
            continue;
        }
        let prefixes = || {
            p.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'/')
                .map(|(i, _)| &p[..i])
        };
        if prefixes().any(|d| files.contains(d)) {
            // A snapshot file stands where the layer has a directory: it hides it whole.
            continue;
        }
        // The shallowest prefix the snapshot has nothing at.
        let at = prefixes().find(|d| !dirs.contains(d)).unwrap_or(p);
        if done.insert(at) {
            let rel = RelPath::from_bytes(at)?;
            if let Some(parent) = rel.parent() {
                state_dir::create_dir_all(&tmp.child(&parent))?;
            }
            state_dir::create_whiteout(&tmp.child(&rel))?;
        }
    }
    Ok(())
}

/// Whether each of the layer's files is at one of `nodes`' paths: then no whiteout is
/// needed, which is the usual case (the user removed no tracked file), found without the path
/// sets of [`whiteouts`]. Both lists in path order are matched in one merge; nodes out of
/// order only make it answer `false`, never a wrong `true` (a hit is an equal path, and each
/// layer file is counted once).
fn every_file_kept(nodes: &[Node], m: &Manifest) -> bool {
    let mut j = 0;
    let mut hits = 0;
    for p in nodes.iter().map(rel_bytes) {
        while m.files.get(j).is_some_and(|f| f.path.as_slice() < p) {
            j += 1;
        }
        if m.files.get(j).is_some_and(|f| f.path == p) {
            hits += 1;
            j += 1;
        }
    }
    hits == m.files.len()
}

/// A snapshot of `original` (canonical) into `dst` (made here): over the project's shared
/// layer in `root`'s store (found, or made from the project's clean tracked files) when the
/// project is a git repository with at least [`min_files`] of them, `dst` then holding only
/// what differs and the layer returned, held; else a full copy into `dst`. `exclude`:
/// directories never entered.
pub fn take(
    root: &Path,
    original: &Path,
    exclude: &[PathBuf],
    dst: &StatePath,
) -> Result<(TreeBase, Option<SharedLayer>, Option<GitRepo>)> {
    let select::Selection { entries, git, .. } = select::select_project(original, exclude)?;
    let t = index_mtime(git.as_ref());
    let nodes: Vec<Node> = entries.iter().map(node_of).collect();
    let srcs: Vec<BaseSrc> = entries.iter().map(|e| source_of(e, t)).collect();
    // The selection (index entries and stat data of every file) is not needed past here: on
    // a large tree it is the biggest thing this step holds while it copies.
    drop(entries);
    let Some(blobs) = layered_blobs(git.is_some(), &srcs) else {
        // On Btrfs (as root) a subvolume: a plan's copy of this base is then a snapshot.
        let (Some(parent), Some(name)) = (dst.as_path().parent(), dst.as_path().file_name()) else {
            return Err(crate::Error::io(
                "create directory",
                dst.as_path(),
                std::io::Error::from(std::io::ErrorKind::InvalidInput),
            ));
        };
        let sub = crate::fs::btrfs::create_subvolume_in(parent, name)
            .map_err(|e| crate::Error::io("create subvolume", dst.as_path(), e))?;
        if !sub {
            state_dir::create_dir_new(dst)?;
        }
        return Ok((copy_whole(original, nodes, dst)?, None, git));
    };
    state_dir::create_dir_new(dst)?;
    let Reused { layer, at } = match reusable(root, original, (&nodes, &srcs, &blobs), None)? {
        Some(r) => r,
        None => {
            let l = shared::make(root, original, |tree| {
                fill_layer(original, &nodes, &srcs, &blobs, tree)
            })?;
            shared::remove_unused(root, original, &l.dir);
            let at = l.manifest()?.positions(nodes.iter().map(rel_bytes));
            let at = Placement { at, exact: false };
            Reused { layer: l, at }
        }
    };
    // What the layer does not serve is copied from the project; a file that vanished
    // meanwhile is not in the snapshot.
    let m = if at.exact {
        None
    } else {
        Some(layer.manifest()?)
    };
    let served: Vec<bool> = (0..nodes.len())
        .map(|i| at.serves(m, i, &nodes[i], &srcs[i]))
        .collect();
    drop(at);
    let copies: Vec<&Node> = (0..nodes.len())
        .filter(|&i| !served[i])
        .map(|i| &nodes[i])
        .collect();
    let out = snapshot::copy_tree(original, &copies, dst, None, None)?;
    let copied: Vec<bool> = out.keys.iter().map(|k| k.is_some()).collect();
    drop((copies, out));
    // The nodes are moved, not cloned, into the snapshot's list (78,635 paths on Linux).
    let mut copied = copied.into_iter();
    let kept: Vec<Node> = nodes
        .into_iter()
        .zip(&served)
        .filter(|(_, s)| **s || copied.next().unwrap_or(false))
        .map(|(n, _)| n)
        .collect();
    if let Some(m) = m {
        whiteouts(&kept, m, dst)?;
    }
    let base = TreeBase {
        dir: dst.as_path().to_path_buf(),
        nodes: kept,
        under: Some(layer.tree()),
    };
    Ok((base, Some(layer), git))
}

/// Writes the blob nodes `blobs` into a new layer's `tree`, copied from the project only
/// while its file still has the stat data the index vouches for (else left out: a snapshot
/// copies it itself). Returns the layer's manifest.
fn fill_layer(
    original: &Path,
    nodes: &[Node],
    srcs: &[BaseSrc],
    blobs: &[usize],
    tree: &StatePath,
) -> Result<Manifest> {
    let picked: Vec<&Node> = blobs.iter().map(|&i| &nodes[i]).collect();
    let stats: Vec<Option<LStat>> = blobs
        .iter()
        .map(|&i| match srcs[i] {
            BaseSrc::Blob(_, st) => Some(st),
            BaseSrc::Dir => None,
        })
        .collect();
    let verify = |k: usize, m: &std::fs::Metadata| Some(LStat::from_metadata(m)) == stats[k];
    let out = snapshot::copy_tree(original, &picked, tree, None, Some(&verify))?;
    let copied: Vec<bool> = out.keys.iter().map(Option::is_some).collect();
    // The copy's records and the stat list go before the manifest is built: on a large tree
    // each is megabytes, and this is the step's peak.
    drop((out, stats, picked));
    Ok(manifest_of(nodes, srcs, blobs, &copied))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::oid::ObjectId;

    fn nodes(paths: &[&str]) -> Vec<Node> {
        paths
            .iter()
            .map(|p| Node {
                rel: RelPath::new(p).unwrap(),
                kind: NodeKind::Symlink,
            })
            .collect()
    }

    fn manifest(paths: &[&str]) -> Manifest {
        let files = paths
            .iter()
            .map(|p| ManifestFile {
                path: p.as_bytes().to_vec(),
                executable: false,
                oid: ObjectId::default(),
                mtime: Timestamp::new(0, 0),
            })
            .collect();
        Manifest { files }
    }

    /// The shortcut answers `true` only when each layer file is one of the nodes' paths.
    #[test]
    fn every_file_kept_only_when_each_layer_file_is_a_node() {
        let m = manifest(&["a", "b/c", "d"]);
        assert!(every_file_kept(&nodes(&["a", "b/c", "d"]), &m));
        assert!(every_file_kept(
            &nodes(&["0", "a", "b/b", "b/c", "c", "d", "e"]),
            &m
        ));
        assert!(!every_file_kept(&nodes(&["a", "d"]), &m));
        assert!(!every_file_kept(&nodes(&["a", "b", "d"]), &m));
        assert!(!every_file_kept(&nodes(&["a", "b/c/x", "d"]), &m));
        assert!(!every_file_kept(&nodes(&["d", "b/c", "a"]), &m));
        assert!(every_file_kept(&nodes(&[]), &manifest(&[])));
        assert!(!every_file_kept(&nodes(&[]), &m));
    }
}
