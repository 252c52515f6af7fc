//! Shared snapshots of originals: `prepare_snapshot` takes one that later `overlay` and
//! `copy_on_write` sandboxes of that original use instead of copying the tree; the
//! substrate's one prune ([`crate::isolation::prune`]) removes those no sandbox holds.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{subdirs, PlanManager};
use crate::isolation::prune::{self, Scope};
use crate::isolation::snapshot::{self, SnapshotInfo};
use crate::plan::error::SandboxError;
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
        let (info, base) = snapshot::prepare(&self.env.lowers, &canon, &self.env.exclude, None)
            .map_err(|e| SandboxError::from_lower(None, "prepare a snapshot", e))?;
        self.env
            .lower_bases
            .lock()
            .insert(info.id.clone(), Arc::new(base));
        // The older snapshots of this original are never taken by a new sandbox again (the
        // newest is), and each is a copy of the tree: those no sandbox uses go now rather
        // than at the next `cleanup_abandoned`, so repeated prepares do not fill the disk.
        // The new snapshot is ready either way: a sweep that fails is retried by that call.
        let _ = self.sweep_lowers(Scope::StaleOf(&canon));
        // The cached bases of the removed ones go too (a stat each, not a second listing).
        self.env
            .lower_bases
            .lock()
            .retain(|id, _| snapshot::base_dir(&self.env.lowers, id).is_dir());
        Ok(info)
    }

    /// Every ready shared snapshot under the root, oldest first.
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        snapshot::list(&self.env.lowers)
    }

    /// Removes every shared snapshot of `original` that no sandbox uses (the newest too:
    /// sandboxes created afterwards take private snapshots until the next
    /// [`PlanManager::prepare_snapshot`]). Returns how many were removed.
    pub fn drop_snapshots(&self, original: impl AsRef<Path>) -> Result<usize, SandboxError> {
        let original = original.as_ref();
        let canon = std::fs::canonicalize(original).unwrap_or_else(|_| original.to_path_buf());
        self.sweep_lowers(Scope::AllOf(&canon))
    }

    /// Removes the shared snapshots no sandbox holds that `scope` names, then the shared
    /// layers nobody holds: the substrate's one prune, after the users of snapshots an
    /// earlier version made (which recorded none) are recorded from the sandboxes' states.
    pub(super) fn sweep_lowers(&self, scope: Scope<'_>) -> Result<usize, SandboxError> {
        let err = |e| SandboxError::from_lower(None, "remove unused shared snapshots", e);
        if !self.env.lowers.is_dir() {
            return Ok(0);
        }
        self.adopt_snapshot_users().map_err(err)?;
        prune::prune(&self.root, scope)
            .map(|p| p.snapshots)
            .map_err(err)
    }

    /// Records, as holders of the snapshots that have no holder records, the sandboxes
    /// whose state names them. Under the store's exclusive lock, so no sandbox starts using
    /// one meanwhile; when a state cannot be read (it might name any of them) nothing is
    /// recorded and those snapshots stay unjudged, so the prune keeps them.
    fn adopt_snapshot_users(&self) -> Result<(), crate::Error> {
        let locked = snapshot::lock_exclusive(&self.env.lowers)?;
        if !snapshot::needs_adoption(&locked) {
            return Ok(());
        }
        let mut users: Vec<(String, PathBuf)> = Vec::new();
        let Ok(plans) = self.plan_dirs() else {
            return Ok(());
        };
        for (_, plan_dir) in plans {
            for dir in subdirs(&plan_dir) {
                if !dir.join(STATE_FILE).exists() {
                    continue;
                }
                match Record::load(&dir) {
                    Ok(r) => {
                        if let Some(id) = r.metadata.get(snapshot::LOWER_KEY) {
                            users.push((id.clone(), dir));
                        }
                    }
                    Err(_) => return Ok(()),
                }
            }
        }
        snapshot::adopt(&locked, &users)
    }
}
