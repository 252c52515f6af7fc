//! The one prune of the substrate: what no sandbox uses any more goes — the snapshots of
//! the snapshot store ([`super::snapshot`]) that no holder's directory still exists for, the
//! remains of snapshots a crash cut short, then the shared lower layers ([`super::shared_lower`])
//! that neither a session nor a remaining snapshot holds. Both faces call it: `sessions
//! prune` and the plan manager's sweeps, each with the [`Scope`] it needs.
//!
//! A snapshot is judged by its holder records alone: every sandbox that takes one records
//! its directory while holding the store's shared lock, and the prune holds it exclusively,
//! so it never removes one a sandbox is starting to use. A snapshot whose users were never
//! recorded (one an earlier version made) is kept until a plan manager records them (see
//! [`super::snapshot::adopt`]).

use std::path::Path;

use super::shared_lower;
use super::snapshot::{self, Exclusive, SnapshotInfo};

/// Which of the unheld snapshots a prune removes. Half-prepared ones always go.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// Every unheld snapshot but the newest prepared for every plan of each original that
    /// still exists: that one is what the next sandbox of the original takes.
    Stale,
    /// Those [`Scope::Stale`] removes, of the original at this (canonical) path only.
    StaleOf(&'a Path),
    /// Every unheld snapshot of the original at this (canonical) path, the newest too.
    AllOf(&'a Path),
}

impl Scope<'_> {
    /// Whether an unheld snapshot `s` goes; `newest`: it is the newest of its original
    /// prepared for every plan.
    fn removes(&self, s: &SnapshotInfo, newest: bool) -> bool {
        let stale = !newest || std::fs::symlink_metadata(&s.original).is_err();
        match self {
            Scope::Stale => stale,
            Scope::StaleOf(o) => s.original == *o && stale,
            Scope::AllOf(o) => s.original == *o,
        }
    }
}

/// What a prune removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Snapshots, half-prepared ones included.
    pub snapshots: usize,
    /// Shared lower layers.
    pub layers: usize,
}

/// Prunes the substrate under `root` (canonical): the snapshots `scope` names that nobody
/// holds, then every shared layer nobody holds (see [`shared_lower::sweep`]). Waits for the
/// store's creates in progress to finish.
pub fn prune(root: &Path, scope: Scope<'_>) -> Result<Pruned, crate::error::Error> {
    let store = snapshot::store_dir(root);
    let snapshots = if store.is_dir() {
        prune_snapshots(&snapshot::lock_exclusive(&store)?, scope)?
    } else {
        0
    };
    let layers = shared_lower::sweep(root);
    Ok(Pruned { snapshots, layers })
}

/// The snapshot half of [`prune`], under a lock the caller holds. Returns how many went.
fn prune_snapshots(locked: &Exclusive, scope: Scope<'_>) -> Result<usize, crate::error::Error> {
    let store = locked.store();
    let mut n = 0;
    let all = snapshot::list(store);
    for (i, s) in all.iter().enumerate() {
        let newest = s.plan.is_none()
            && !all[i + 1..]
                .iter()
                .any(|t| t.original == s.original && t.plan.is_none());
        if scope.removes(s, newest) && !snapshot::held(store, &s.id) {
            snapshot::remove(store, &s.id)?;
            n += 1;
        }
    }
    // Under the exclusive lock no snapshot is being prepared: these are remains of a crash.
    let rd = std::fs::read_dir(store)
        .map_err(|e| crate::error::Error::io("read directory", store, e))?;
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let half = name.starts_with(snapshot::TMP_PREFIX)
            || (ulid::Ulid::from_string(name).is_ok()
                && snapshot::read_info(store, name).is_none());
        if half && e.file_type().is_ok_and(|t| t.is_dir()) {
            snapshot::remove(store, name)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Removes snapshot `id` of `store` if it serves one plan alone and no holder of it exists
/// any more: called when a sandbox that took it goes. Best effort, and never waits: when
/// the store is in use the snapshot stays for the next [`prune`].
pub fn release(store: &Path, id: &str) {
    let unheld_own = |s: &SnapshotInfo| s.plan.is_some() && !snapshot::held(store, id);
    if !snapshot::read_info(store, id).is_some_and(|s| unheld_own(&s)) {
        return;
    }
    let Some(_locked) = snapshot::try_lock_exclusive(store) else {
        return;
    };
    // Exclusive: no create is taking it meanwhile; look again.
    if snapshot::read_info(store, id).is_some_and(|s| unheld_own(&s)) {
        let _ = snapshot::remove(store, id);
    }
}
