//! The snapshot store: stable point-in-time snapshots of an original, each used as the
//! lower layer (and the pre-images) of every plan `overlay` sandbox, and the base of every
//! `copy_on_write` one, made from it afterwards, so making such a sandbox costs a few
//! directories and a mount, or a single copy, not a snapshot of the tree.
//!
//! ```text
//! <root>/plans/lower/
//!   lock                  flock: shared while a snapshot is prepared or a sandbox takes
//!                         one; exclusive while unused snapshots are pruned
//!   .tmp-<ulid>/          a snapshot being prepared (renamed when complete)
//!   <ulid>/               a ready snapshot (the rename made it ready, atomically)
//!     info.json           its SnapshotInfo
//!     nodes               its files, listed (so a reopened manager need not walk it)
//!     holders/<key>       one file per directory that uses it (a sandbox's), holding its
//!                         path: the snapshot stays while one of them exists
//!     base/               the files: what the session engine's snapshot selects — or,
//!                         over the project's shared lower layer, only what differs
//! <root>/lowers/          the shared lower layers (see [`super::shared_lower`])
//! ```
//!
//! The store lies under `plans/`, where the plans that first used it put it: the path is
//! kept so roots made by earlier versions keep their snapshots.
//!
//! In a git project with enough clean tracked files, a snapshot stacks the project's shared
//! lower layer, the one sessions stack too (see [`super::layered`]): once that layer exists,
//! a snapshot costs the walk of the project and copies of what differs from the layer, not
//! a copy of the project. Its `info.json` names the layer, and the layer records the
//! snapshot among its holders, so the layer stays while the snapshot exists.
//!
//! A snapshot is a point-in-time view of the original. Sandboxes made from it commit through
//! the 3-way apply with it as pre-images, so edits the user made to the original after the
//! snapshot merge (or the commit is refused as a conflict): staleness costs merge work, never
//! correctness. Preparing again makes a newer snapshot that later sandboxes use; sandboxes
//! already made keep theirs. A snapshot is never written after it is ready (but for its
//! holders), and never removed while a holder exists: one prune ([`super::prune`]) removes
//! the unheld ones, with the shared layers they held.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::tree_base::{load as load_tree_base, TreeBase};
use crate::fs::unix_millis;

mod holders;
mod lock;
mod nodes;
mod prepare;

pub(crate) use holders::held;
pub use holders::{adopt, hold_for, holders, needs_adoption};
pub use lock::{lock_exclusive, lock_shared, try_lock_exclusive, Exclusive};
pub use prepare::prepare;

/// The store's directory under the root.
pub const STORE_DIR: &str = "plans/lower";

/// The directory of the store under `root`.
pub fn store_dir(root: &Path) -> PathBuf {
    root.join(STORE_DIR)
}

/// The key, in a plan sandbox's metadata, of the snapshot it uses (its id).
pub const LOWER_KEY: &str = "overlay.lower";

const INFO: &str = "info.json";
const NODES: &str = "nodes";
const BASE: &str = "base";
pub(crate) const TMP_PREFIX: &str = ".tmp-";

/// A prepared snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Its ULID (ULIDs sort by creation time: the greatest is the newest).
    pub id: String,
    /// The original it is a snapshot of (canonical path).
    pub original: PathBuf,
    /// When it was taken.
    #[serde(with = "unix_millis")]
    pub created_at: SystemTime,
    /// How many files and symlinks it holds.
    pub files: usize,
    /// The plan this snapshot serves alone, when a create of that plan took it; `None` for
    /// one prepared for every plan (`plan::Manager::prepare_snapshot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// The project's shared lower layer (its `tree/`, in `<root>/lowers/`) under `base/`,
    /// when the snapshot is layered: `base/` then holds only what differs from it (see
    /// [`super::layered`]). `None`: `base/` holds every file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<PathBuf>,
    /// Where its files are (the overlay's upper lower directory); filled in when read.
    #[serde(skip)]
    pub path: PathBuf,
}

fn io(what: &'static str, p: &Path, e: std::io::Error) -> crate::error::Error {
    crate::error::Error::io(what, p, e)
}

/// The root the store `store` (`<root>/plans/lower`) is in: the shared lower layers its
/// snapshots stack are that root's (`<root>/lowers/`).
pub(crate) fn root_of(store: &Path) -> PathBuf {
    store
        .parent()
        .and_then(Path::parent)
        .unwrap_or(store)
        .to_path_buf()
}

/// The files directory of snapshot `id`.
pub fn base_dir(store: &Path, id: &str) -> PathBuf {
    store.join(id).join(BASE)
}

/// Every ready snapshot in `store`, oldest first.
pub fn list(store: &Path) -> Vec<SnapshotInfo> {
    let Ok(rd) = std::fs::read_dir(store) else {
        return Vec::new();
    };
    let mut out: Vec<SnapshotInfo> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            ulid::Ulid::from_string(&name).ok()?;
            read_info(store, &name)
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The snapshot `id`, if it is ready.
pub fn read_info(store: &Path, id: &str) -> Option<SnapshotInfo> {
    let data = std::fs::read(store.join(id).join(INFO)).ok()?;
    let mut info: SnapshotInfo = serde_json::from_slice(&data).ok()?;
    if info.id != id {
        return None;
    }
    info.path = base_dir(store, id);
    Some(info)
}

/// The newest ready snapshot of `original` (canonical) prepared for every plan.
pub fn newest_for(store: &Path, original: &Path) -> Option<SnapshotInfo> {
    list(store)
        .into_iter()
        .rev()
        .find(|i| i.original == original && i.plan.is_none())
}

/// The base of snapshot `id`: its recorded listing, else a walk of its files.
pub fn load_base(store: &Path, id: &str) -> Result<TreeBase, crate::error::Error> {
    let dir = base_dir(store, id);
    let under = read_info(store, id).and_then(|i| i.shared);
    if let Some(nodes) = std::fs::read(store.join(id).join(NODES))
        .ok()
        .and_then(|d| nodes::decode(&d))
    {
        return Ok(TreeBase { dir, nodes, under });
    }
    if under.is_some() {
        // A layered snapshot's files are not all in `base/`: no walk of it lists them.
        let p = store.join(id).join(NODES);
        return Err(io(
            "read",
            &p,
            std::io::Error::other("snapshot listing missing"),
        ));
    }
    load_tree_base(&dir)
}

/// Removes snapshot `name` (ready or not). The caller holds the exclusive [`lock`].
pub(crate) fn remove(store: &Path, name: &str) -> Result<(), crate::error::Error> {
    crate::fs::state_dir::remove_dir_tree(&store.join(name))
}
