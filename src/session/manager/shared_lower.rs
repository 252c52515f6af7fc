//! `.lower/` over a shared layer: in an overlay session of a git project, the clean tracked
//! files come from a layer shared with the project's other sessions (see
//! [`crate::isolation::shared_lower`]), and `.lower/` holds only what differs from it. The
//! view through a mount is file for file (content, mode, mtime) what a copy would be.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::*;
use crate::isolation::shared_lower::{self as shared, Manifest, ManifestFile};

/// Projects with fewer clean tracked files than this materialize `.lower/` whole: a shared
/// layer saves nothing worth its bookkeeping there.
const DEFAULT_MIN_FILES: usize = 2000;

/// Overrides [`DEFAULT_MIN_FILES`] (a number; `off` disables shared layers).
pub const MIN_FILES_ENV: &str = "PATCHBOX_SHARED_LOWER_MIN";

/// A shared layer is reused while the files `.lower/` would have to hold beyond the
/// snapshot's own copies stay under this share of the tracked files (and over it, a new
/// layer is made: the project moved on).
const REUSE_MAX_SHARE: usize = 10;

impl SandboxManager {
    /// Fills `tmp` (the `.lower/` being made) as the difference from a shared layer of the
    /// project, found or made, and records that layer in the session (`.lower.shared`).
    /// Returns the stat data of every file of the view (for the private repository's
    /// index); `None` when the session does not use a shared layer (not a git project, too
    /// few tracked files, or disabled), and then `tmp` is untouched.
    pub(super) fn lower_over_shared(
        &self,
        sbase: &SessionBase,
        tmp: &SessionPath,
    ) -> Result<Option<Vec<ManifestEntry>>> {
        let base = &sbase.base;
        let min = match std::env::var(MIN_FILES_ENV) {
            Ok(v) if v == "off" => return Ok(None),
            Ok(v) => v.parse().unwrap_or(DEFAULT_MIN_FILES),
            Err(_) => DEFAULT_MIN_FILES,
        };
        let blobs: Vec<usize> = (0..base.nodes.len())
            .filter(|&i| matches!(base.srcs[i], BaseSrc::Blob(..)))
            .collect();
        if sbase.repo.is_none() || blobs.is_empty() || blobs.len() < min {
            return Ok(None);
        }
        // An outgrown layer is let go (its lock with it) before a new one is made, so the
        // sweep after making can remove it.
        let found = shared::newest(&self.root, &self.project)?
            .filter(|l| mismatches(base, &blobs, &l.manifest) <= blobs.len() / REUSE_MAX_SHARE);
        let layer = match found {
            Some(l) => l,
            None => {
                let l = shared::make(&self.root, &self.project, |tree| {
                    self.fill_shared(base, &blobs, tree)
                })?;
                shared::remove_unused(&self.root, &self.project, &l.dir);
                l
            }
        };
        let entries = self.fill_delta(base, &layer, tmp)?;
        let record = self.path_in_session_base(Path::new(layout::SHARED_LOWER_FILE))?;
        session_dir::write_atomic(&record, layer.tree().as_os_str().as_bytes())?;
        // Only the hold is kept for the session's life: the manifest (tens of MB on a large
        // tree) is read again by whoever needs it.
        let mut layer = layer;
        layer.manifest = Manifest::default();
        *self.shared_lower.lock() = Some(layer);
        Ok(Some(entries))
    }

    /// Writes the blob nodes `blobs` of `base` into a new shared layer's `tree`.
    fn fill_shared(&self, base: &Base, blobs: &[usize], tree: &SessionPath) -> Result<Manifest> {
        self.copy_blobs(base, blobs, tree, None)?;
        let files = blobs
            .iter()
            .filter_map(|&i| match base.srcs[i] {
                BaseSrc::Blob(oid, st) => Some(ManifestFile {
                    path: base.nodes[i].rel.as_path().as_os_str().as_bytes().to_vec(),
                    executable: matches!(base.nodes[i].kind, NodeKind::File { executable: true }),
                    oid,
                    mtime: st.mtime,
                }),
                BaseSrc::Dir => None,
            })
            .collect();
        Ok(Manifest { files })
    }

    /// Fills `tmp` with what the view needs beyond `layer`: the snapshot's copies in
    /// `base/`, the blob nodes the layer holds differently, and whiteouts over the layer's
    /// files the snapshot lacks. Returns the stat data of every file of the view.
    fn fill_delta(
        &self,
        base: &Base,
        layer: &shared::SharedLayer,
        tmp: &SessionPath,
    ) -> Result<Vec<ManifestEntry>> {
        let mut copies = Vec::new();
        let mut differ = Vec::new();
        let mut served = Vec::new();
        for (i, (n, s)) in base.nodes.iter().zip(&base.srcs).enumerate() {
            match s {
                BaseSrc::Dir => copies.push(n),
                BaseSrc::Blob(..) if served_by(layer.manifest.get(rel_bytes(n)), n, s) => {
                    served.push(i)
                }
                BaseSrc::Blob(..) => differ.push(i),
            }
        }
        let a = snapshot::copy_tree(&base.dir, &copies, tmp, None, None)?;
        let b = self.copy_blobs(base, &differ, tmp, None)?;
        whiteouts(base, &layer.manifest, tmp)?;

        let entry = |rel: &RelPath, key| ManifestEntry {
            rel: rel.clone(),
            key,
            same_as_base: true,
        };
        let mut entries = Vec::with_capacity(base.nodes.len());
        for (n, k) in copies.iter().zip(a.keys) {
            if let Some(k) = k {
                entries.push(entry(&n.rel, k));
            }
        }
        for (&i, k) in differ.iter().zip(b) {
            entries.push(entry(&base.nodes[i].rel, k));
        }
        // Through the mount a file of a lower layer shows that file's own stat data (all
        // layers on one filesystem), which is what git's index must hold to see it clean.
        let tree = layer.tree();
        for &i in &served {
            let rel = &base.nodes[i].rel;
            let p = tree.join(rel.as_path());
            let m = std::fs::symlink_metadata(&p)
                .map_err(|e| Error::io("stat shared lower file", &p, e))?;
            entries.push(entry(rel, StatKey::from_metadata(&m)));
        }
        Ok(entries)
    }
}

fn rel_bytes(n: &Node) -> &[u8] {
    n.rel.as_path().as_os_str().as_bytes()
}

/// Whether the layer's file `f` is exactly the blob node `n` (same blob, mode and mtime).
fn served_by(f: Option<&ManifestFile>, n: &Node, s: &BaseSrc) -> bool {
    match (f, s) {
        (Some(f), BaseSrc::Blob(oid, st)) => {
            f.oid == *oid
                && f.mtime == st.mtime
                && matches!(n.kind, NodeKind::File { executable } if executable == f.executable)
        }
        _ => false,
    }
}

/// How many of the blob nodes `blobs` the layer does not hold as they are.
fn mismatches(base: &Base, blobs: &[usize], m: &Manifest) -> usize {
    blobs
        .iter()
        .filter(|&&i| {
            !served_by(
                m.get(rel_bytes(&base.nodes[i])),
                &base.nodes[i],
                &base.srcs[i],
            )
        })
        .count()
}

/// Whiteouts in `tmp` over the layer's files that are not in the snapshot: at the
/// shallowest path of each that the snapshot has nothing at (a whole directory the user
/// removed is one whiteout); nothing where a snapshot file already covers the path.
fn whiteouts(base: &Base, m: &Manifest, tmp: &SessionPath) -> Result<()> {
    let files: HashSet<&[u8]> = base.nodes.iter().map(rel_bytes).collect();
    let mut dirs: HashSet<&[u8]> = HashSet::new();
    for n in &base.nodes {
        let p = rel_bytes(n);
        for (i, b) in p.iter().enumerate() {
            if *b == b'/' {
                dirs.insert(&p[..i]);
            }
        }
    }
    let mut done: HashSet<&[u8]> = HashSet::new();
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
                session_dir::create_dir_all(&tmp.child(&parent))?;
            }
            session_dir::create_whiteout(&tmp.child(&rel))?;
        }
    }
    Ok(())
}
