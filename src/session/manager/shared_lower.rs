//! `.lower/` over a shared layer: in an overlay session of a git project, the clean tracked
//! files come from a layer shared with the project's other sessions (see
//! [`crate::isolation::shared_lower`]), and `.lower/` holds only what differs from it. The
//! view through a mount is file for file (content, mode, mtime) what a copy would be. The
//! rules (which files the layer serves, when it is reused, the whiteouts) are the
//! substrate's, [`crate::isolation::layered`], which plans' snapshots follow too.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::*;
use crate::isolation::layer_stats;
use crate::isolation::layered::{self, rel_bytes, Placement};
use crate::isolation::shared_lower::{self as shared, Manifest};

impl SandboxManager {
    /// Fills `tmp` (the `.lower/` being made) as the difference from a shared layer of the
    /// project, found or made, and records that layer in the session (`.lower.shared`).
    /// Returns the stat data of every file of the view (for the private repository's
    /// index); `None` when the session does not use a shared layer (not a git project, too
    /// few tracked files, or disabled), and then `tmp` is untouched.
    pub(super) fn lower_over_shared(
        &self,
        sbase: &SessionBase,
        tmp: &StatePath,
    ) -> Result<Option<Vec<Option<StatKey>>>> {
        let base = &sbase.base;
        let Some(blobs) = layered::layered_blobs(sbase.repo.is_some(), &base.srcs) else {
            return Ok(None);
        };
        // An outgrown layer is let go (its lock with it) before a new one is made, so the
        // sweep after making can remove it.
        let found = layered::reusable(
            &self.root,
            &self.project,
            (&base.nodes, &base.srcs, &blobs),
            sbase.blob_digest,
        )?;
        let (layer, at) = match found {
            Some(r) => (r.layer, Some(r.at)),
            None => {
                let mut keys = Vec::new();
                let l = shared::make(&self.root, &self.project, |tree| {
                    let (m, k) = self.fill_shared(base, &blobs, tree)?;
                    keys = k;
                    Ok(m)
                })?;
                // What the copy just read is what every later session would stat again.
                let _ = layer_stats::record(&l, &keys);
                shared::remove_unused(&self.root, &self.project, &l.dir);
                (l, None)
            }
        };
        // The record's two `fsync`s wait for the journal (busy with the blob list's
        // write-back): on a second core, while `.lower/` is filled. On failure the caller
        // removes the record with `.lower/`.
        let record = self.path_in_state_dir(Path::new(layout::SHARED_LOWER_FILE))?;
        let tree = layer.tree();
        let (recorded, entries) = crate::cores::beside(
            || state_dir::write_atomic(&record, tree.as_os_str().as_bytes()),
            || self.fill_delta(base, &layer, at, tmp),
        );
        let entries = entries?;
        recorded?;
        // Only the hold is kept for the session's life: the manifest (tens of MB on a large
        // tree) is read again by whoever needs it.
        let mut layer = layer;
        layer.release_manifest();
        *self.shared_lower.lock() = Some(layer);
        Ok(Some(entries))
    }

    /// Writes the blob nodes `blobs` of `base` into a new shared layer's `tree`. Returns its
    /// manifest and the stat data of its files, in the manifest's order.
    fn fill_shared(
        &self,
        base: &Base,
        blobs: &[usize],
        tree: &StatePath,
    ) -> Result<(Manifest, Vec<StatKey>)> {
        let keys = self.copy_blobs(base, blobs, tree, None)?;
        let all = vec![true; blobs.len()];
        Ok((
            layered::manifest_of(&base.nodes, &base.srcs, blobs, &all),
            keys,
        ))
    }

    /// Fills `tmp` with what the view needs beyond `layer`: the snapshot's copies in
    /// `base/`, the blob nodes the layer holds differently, and whiteouts over the layer's
    /// files the snapshot lacks. `at`: where each node is in the layer's manifest, when
    /// the reuse check computed it. Returns the stat data of every file of the view, per
    /// node of the base (`None`: not in the view, a copy that vanished).
    fn fill_delta(
        &self,
        base: &Base,
        layer: &shared::SharedLayer,
        at: Option<Placement>,
        tmp: &StatePath,
    ) -> Result<Vec<Option<StatKey>>> {
        let mut copies = Vec::new();
        let mut differ = Vec::new();
        let mut served = Vec::new();
        let at = match at {
            Some(at) => at,
            None => Placement {
                at: layer
                    .manifest()?
                    .positions(base.nodes.iter().map(rel_bytes)),
                exact: false,
            },
        };
        // An exact placement never reads the manifest (see `layered::reusable`).
        let m = if at.exact {
            None
        } else {
            Some(layer.manifest()?)
        };
        for (i, (n, s)) in base.nodes.iter().zip(&base.srcs).enumerate() {
            match (s, at.at[i]) {
                (BaseSrc::Dir, _) => copies.push(i),
                (BaseSrc::Blob(..), Some(k)) if at.serves(m, i, n, s) => served.push((i, k)),
                (BaseSrc::Blob(..), _) => differ.push(i),
            }
        }
        drop(at);
        // Through the mount a file of a lower layer shows that file's own stat data (all
        // layers on one filesystem), which is what git's index must hold to see it clean:
        // recorded once per layer, not statted again per session. Read on a second core
        // while the copies are made.
        let read = || {
            if served.is_empty() {
                Ok(Vec::new())
            } else {
                layer_stats::keys(layer)
            }
        };
        let (keys, made) = crate::cores::beside(read, || -> Result<_> {
            let nodes: Vec<&Node> = copies.iter().map(|&i| &base.nodes[i]).collect();
            // `base/` and `.lower/` are both never written in place: links, not copies.
            let a = snapshot::link_tree(&base.dir, &nodes, tmp)?;
            let b = self.copy_blobs(base, &differ, tmp, None)?;
            if let Some(m) = m {
                layered::whiteouts(&base.nodes, m, tmp)?;
            }
            Ok((a.keys, b))
        });
        let (keys, (copied, rewritten)) = (keys?, made?);
        let mut by_node = vec![None; base.nodes.len()];
        for (&i, k) in copies.iter().zip(copied) {
            by_node[i] = k;
        }
        for (&i, k) in differ.iter().zip(rewritten) {
            by_node[i] = Some(k);
        }
        for &(i, k) in &served {
            let key = keys.get(k).copied().ok_or_else(|| {
                Error::io(
                    "read shared lower stats",
                    layer.dir.as_path(),
                    std::io::Error::other("fewer records than files"),
                )
            })?;
            by_node[i] = Some(key);
        }
        Ok(by_node)
    }
}
