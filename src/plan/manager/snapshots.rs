//! Shared snapshots of originals: `prepare_snapshot` takes one that later `overlay` and
//! `copy_on_write` sandboxes of that original use instead of copying the tree; the sweeps
//! remove those no sandbox's state names.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::{subdirs, PlanManager};
use crate::plan::error::SandboxError;
use crate::plan::lower::{self, SnapshotInfo};
use crate::plan::record::{Record, STATE_FILE};

impl PlanManager {
    /// Takes a stable snapshot of `original` that every `overlay` sandbox created for it
    /// afterwards (same canonical path, any plan) uses as its lower layer, pre-images and
    /// rollback source, instead of copying the tree: their creation then costs a few
    /// directories and a mount, whatever the tree's size. The snapshot is taken with the
    /// snapshot engine into `<root>/plans/lower/<ulid>/` and becomes ready atomically (a
    /// rename) when complete; a manager opened later over the root finds it.
    ///
    /// A snapshot is a point-in-time view: edits made to the original after it are not in
    /// the sandboxes' view, and their commits merge with those edits through the 3-way apply
    /// (or refuse on a conflict), as for any sandbox whose original changed after create.
    /// Calling this again takes a newer snapshot for the sandboxes created after it;
    /// existing sandboxes keep theirs, and the older snapshots of the original that no
    /// sandbox uses are removed then. [`PlanManager::cleanup_abandoned`] removes the
    /// snapshots no sandbox uses that are not the newest of their original;
    /// [`PlanManager::drop_snapshots`] removes the unused ones of an original.
    pub fn prepare_snapshot(
        &self,
        original: impl AsRef<Path>,
    ) -> Result<SnapshotInfo, SandboxError> {
        let original = original.as_ref();
        let canon = std::fs::canonicalize(original)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| {
                SandboxError::sandbox(
                    None,
                    format!("cannot snapshot {}: not a directory", original.display()),
                )
            })?;
        let (info, base) = lower::prepare(&self.env.lowers, &canon, &self.env.exclude, None)
            .map_err(|e| SandboxError::from_lower(None, "prepare a snapshot", e))?;
        self.env
            .lower_bases
            .lock()
            .insert(info.id.clone(), Arc::new(base));
        // The older snapshots of this original are never taken by a new sandbox again (the
        // newest is), and each is a copy of the tree: those no sandbox uses go now rather
        // than at the next `cleanup_abandoned`, so repeated prepares do not fill the disk.
        // The new snapshot is ready either way: a sweep that fails is retried by that call.
        let _ = self.sweep_lowers(&|s, newest| s.original == canon && !newest);
        // The cached bases of the removed ones go too (a stat each, not a second listing).
        self.env
            .lower_bases
            .lock()
            .retain(|id, _| lower::base_dir(&self.env.lowers, id).is_dir());
        Ok(info)
    }

    /// Every ready shared snapshot under the root, oldest first.
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        lower::list(&self.env.lowers)
    }

    /// Removes every shared snapshot of `original` that no sandbox uses (the newest too:
    /// sandboxes created afterwards take private snapshots until the next
    /// [`PlanManager::prepare_snapshot`]). Returns how many were removed.
    pub fn drop_snapshots(&self, original: impl AsRef<Path>) -> Result<usize, SandboxError> {
        let original = original.as_ref();
        let canon = std::fs::canonicalize(original).unwrap_or_else(|_| original.to_path_buf());
        self.sweep_lowers(&|s, _| s.original == canon)
    }

    /// Removes the shared snapshots no sandbox's state names that `removable` accepts.
    pub(super) fn sweep_lowers(
        &self,
        removable: &dyn Fn(&SnapshotInfo, bool) -> bool,
    ) -> Result<usize, SandboxError> {
        let err = |e| SandboxError::from_lower(None, "remove unused shared snapshots", e);
        if !self.env.lowers.is_dir() {
            return Ok(0);
        }
        // Taken first, so no sandbox can start using a snapshot while references are read.
        let _lock = lower::lock(&self.env.lowers, true).map_err(err)?;
        let mut referenced = HashSet::new();
        for (_, plan_dir) in self.plan_dirs()? {
            for dir in subdirs(&plan_dir) {
                if !dir.join(STATE_FILE).exists() {
                    continue;
                }
                match Record::load(&dir) {
                    Ok(r) => {
                        if let Some(id) = r.metadata.get(lower::LOWER_KEY) {
                            referenced.insert(id.clone());
                        }
                    }
                    // A state that cannot be read might name any of them: keep them all.
                    Err(_) => return Ok(0),
                }
            }
        }
        lower::sweep(&self.env.lowers, &referenced, removable).map_err(err)
    }
}
