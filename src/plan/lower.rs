//! Shared lower snapshots: one stable snapshot of an original that every `overlay` sandbox
//! created for it afterwards uses as its lower layer, so creating such a sandbox costs a few
//! directories and a mount, whatever the tree's size.
//!
//! ```text
//! <root>/plans/lower/
//!   lock                  flock: shared while a snapshot is prepared or a sandbox takes
//!                         one; exclusive while unused snapshots are swept
//!   .tmp-<ulid>/          a snapshot being prepared (renamed when complete)
//!   <ulid>/               a ready snapshot (the rename made it ready, atomically)
//!     info.json           its SnapshotInfo
//!     nodes               its files, listed (so a reopened manager need not walk it)
//!     base/               the files: what the session engine's snapshot selects — or,
//!                         over the project's shared lower layer, only what differs
//! <root>/lowers/          the shared lower layers (see [`crate::isolation::shared_lower`])
//! ```
//!
//! In a git project with enough clean tracked files, a snapshot stacks the project's shared
//! lower layer, the one sessions stack too (see [`crate::isolation::layered`]): once that
//! layer exists, a snapshot costs the walk of the project and copies of what differs from
//! the layer, not a copy of the project. Its `info.json` names the layer, and the layer
//! records the snapshot among its holders, so the store's sweep keeps it while the snapshot
//! exists. Snapshots made before layering (no layer named) are read and swept as they are.
//!
//! A snapshot is a point-in-time view of the original. Sandboxes made from it commit through
//! the 3-way apply with it as pre-images, so edits the user made to the original after the
//! snapshot merge (or the commit is refused as a conflict): staleness costs merge work, never
//! correctness. Preparing again makes a newer snapshot that later sandboxes use; sandboxes
//! already made keep theirs. A snapshot is never written after it is ready, and never removed
//! while a sandbox's state names it.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::model::unix_millis;
use super::strategy::tree_base::{load as load_tree_base, TreeBase};
use crate::fs::state_dir::{self, StateDir};
use crate::fs::RelPath;
use crate::isolation::{layered, shared_lower};
use crate::tree::snapshot::{Node, NodeKind};

/// The directory of shared snapshots under the plans directory.
pub const LOWER_DIR: &str = "lower";

/// The key, in an `overlay` sandbox's metadata, of the shared snapshot it uses (its id);
/// absent when the sandbox took a private snapshot.
pub const LOWER_KEY: &str = "overlay.lower";

const INFO: &str = "info.json";
const NODES: &str = "nodes";
const BASE: &str = "base";
const LOCK: &str = "lock";
const TMP_PREFIX: &str = ".tmp-";

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
    /// The plan this snapshot serves alone, when a create of that plan took it
    /// (see [`crate::plan::plan_lower`]); `None` for one prepared for every plan
    /// ([`crate::plan::PlanManager::prepare_snapshot`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// The project's shared lower layer (its `tree/`, in `<root>/lowers/`) under `base/`,
    /// when the snapshot is layered: `base/` then holds only what differs from it (see
    /// [`crate::isolation::layered`]). `None`: `base/` holds every file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<PathBuf>,
    /// Where its files are (the overlay's upper lower directory); filled in when read.
    #[serde(skip)]
    pub path: PathBuf,
}

fn io(what: &'static str, p: &Path, e: std::io::Error) -> crate::Error {
    crate::Error::io(what, p, e)
}

/// The lock of the snapshot directory `lowers`, shared or exclusive (blocking).
pub(crate) fn lock(lowers: &Path, exclusive: bool) -> Result<std::fs::File, crate::Error> {
    std::fs::create_dir_all(lowers).map_err(|e| io("create directory", lowers, e))?;
    let p = lowers.join(LOCK);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| io("open", &p, e))?;
    let op = if exclusive {
        rustix::fs::FlockOperation::LockExclusive
    } else {
        rustix::fs::FlockOperation::LockShared
    };
    rustix::fs::flock(&f, op).map_err(|e| io("flock", &p, e.into()))?;
    Ok(f)
}

/// The lock of `lowers`, exclusive, if nobody holds it now (`None` also when it cannot be
/// opened).
pub(crate) fn try_lock_exclusive(lowers: &Path) -> Option<std::fs::File> {
    let f = std::fs::File::open(lowers.join(LOCK)).ok()?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(f)
}

/// The root the store `lowers` (`<root>/plans/lower`) is in: the shared lower layers its
/// snapshots stack are that root's (`<root>/lowers/`).
fn root_of(lowers: &Path) -> PathBuf {
    lowers
        .parent()
        .and_then(Path::parent)
        .unwrap_or(lowers)
        .to_path_buf()
}

/// The files directory of snapshot `id`.
pub(crate) fn base_dir(lowers: &Path, id: &str) -> PathBuf {
    lowers.join(id).join(BASE)
}

/// Takes a snapshot of `original` (canonical) into `lowers`, ready when this returns.
/// `exclude`: directories never entered; `plan`: the plan it serves alone, if any.
pub(crate) fn prepare(
    lowers: &Path,
    original: &Path,
    exclude: &[PathBuf],
    plan: Option<&str>,
) -> Result<(SnapshotInfo, TreeBase), crate::Error> {
    let _lock = lock(lowers, false)?;
    let id = crate::id::next_string();
    let tmp = lowers.join(format!("{TMP_PREFIX}{id}"));
    std::fs::create_dir(&tmp).map_err(|e| io("create directory", &tmp, e))?;
    let made = (|| {
        let sd = StateDir::open(&tmp)?;
        let (base, layer, _) = layered::take(
            &root_of(lowers),
            original,
            exclude,
            &sd.join(Path::new(BASE))?,
        )?;
        if let Some(l) = &layer {
            // The snapshot's final directory holds the layer once it is renamed in place;
            // until then this process holds it.
            shared_lower::hold_for(l, &lowers.join(&id))?;
        }
        state_dir::write_atomic(&sd.join(Path::new(NODES))?, &encode_nodes(&base.nodes))?;
        let info = SnapshotInfo {
            id: id.clone(),
            original: original.to_path_buf(),
            // Whole milliseconds, as stored: the info read back equals this one.
            created_at: whole_millis(SystemTime::now()),
            files: base.nodes.len(),
            plan: plan.map(str::to_string),
            shared: base.under.clone(),
            path: PathBuf::new(),
        };
        let json = serde_json::to_vec_pretty(&info)
            .map_err(|e| io("encode", &tmp.join(INFO), std::io::Error::other(e)))?;
        state_dir::write_atomic(&sd.join(Path::new(INFO))?, &json)?;
        Ok::<_, crate::Error>((info, base, layer))
    })();
    let (mut info, mut base, _layer) = match made {
        Ok(x) => x,
        Err(e) => {
            let _ = state_dir::remove_dir_tree(&tmp);
            return Err(e);
        }
    };
    let dst = lowers.join(&id);
    std::fs::rename(&tmp, &dst).map_err(|e| io("rename", &tmp, e))?;
    if let Ok(d) = std::fs::File::open(lowers) {
        let _ = d.sync_all();
    }
    info.path = base_dir(lowers, &id);
    base.dir = info.path.clone();
    Ok((info, base))
}

fn whole_millis(t: SystemTime) -> SystemTime {
    let ms = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

/// Every ready snapshot in `lowers`, oldest first.
pub(crate) fn list(lowers: &Path) -> Vec<SnapshotInfo> {
    let Ok(rd) = std::fs::read_dir(lowers) else {
        return Vec::new();
    };
    let mut out: Vec<SnapshotInfo> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            ulid::Ulid::from_string(&name).ok()?;
            read_info(lowers, &name)
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The snapshot `id`, if it is ready.
pub(crate) fn read_info(lowers: &Path, id: &str) -> Option<SnapshotInfo> {
    let data = std::fs::read(lowers.join(id).join(INFO)).ok()?;
    let mut info: SnapshotInfo = serde_json::from_slice(&data).ok()?;
    if info.id != id {
        return None;
    }
    info.path = base_dir(lowers, id);
    Some(info)
}

/// The newest ready snapshot of `original` (canonical) prepared for every plan.
pub(crate) fn newest_for(lowers: &Path, original: &Path) -> Option<SnapshotInfo> {
    list(lowers)
        .into_iter()
        .rev()
        .find(|i| i.original == original && i.plan.is_none())
}

/// The base of snapshot `id`: its recorded listing, else a walk of its files.
pub(crate) fn load_base(lowers: &Path, id: &str) -> Result<TreeBase, crate::Error> {
    let dir = base_dir(lowers, id);
    let under = read_info(lowers, id).and_then(|i| i.shared);
    if let Some(nodes) = std::fs::read(lowers.join(id).join(NODES))
        .ok()
        .and_then(|d| decode_nodes(&d))
    {
        return Ok(TreeBase { dir, nodes, under });
    }
    if under.is_some() {
        // A layered snapshot's files are not all in `base/`: no walk of it lists them.
        let p = lowers.join(id).join(NODES);
        return Err(io(
            "read",
            &p,
            std::io::Error::other("snapshot listing missing"),
        ));
    }
    load_tree_base(&dir)
}

/// Removes snapshot `id` (ready or not).
pub(crate) fn remove(lowers: &Path, name: &str) -> Result<(), crate::Error> {
    state_dir::remove_dir_tree(&lowers.join(name))
}

/// Sweeps `lowers` (the caller holds the exclusive [`lock`]): removes the snapshots `referenced` does not
/// name and that `removable` accepts (given the snapshot and whether it is the newest of its
/// original prepared for every plan; a plan's own snapshot is never that newest one: no
/// later plan takes it), and half-prepared ones. Returns how many went.
pub(crate) fn sweep(
    lowers: &Path,
    referenced: &HashSet<String>,
    removable: &dyn Fn(&SnapshotInfo, bool) -> bool,
) -> Result<usize, crate::Error> {
    let mut n = 0;
    let all = list(lowers);
    for (i, s) in all.iter().enumerate() {
        let newest = s.plan.is_none()
            && !all[i + 1..]
                .iter()
                .any(|t| t.original == s.original && t.plan.is_none());
        if !referenced.contains(&s.id) && removable(s, newest) {
            remove(lowers, &s.id)?;
            n += 1;
        }
    }
    // Holding the exclusive lock: no snapshot is being prepared, so these are remains of a
    // crash.
    let rd = std::fs::read_dir(lowers).map_err(|e| io("read directory", lowers, e))?;
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let half = name.starts_with(TMP_PREFIX)
            || (ulid::Ulid::from_string(name).is_ok() && read_info(lowers, name).is_none());
        if half && e.file_type().is_ok_and(|t| t.is_dir()) {
            remove(lowers, name)?;
            n += 1;
        }
    }
    // The shared layers the removed snapshots held go with the store's one sweep.
    shared_lower::sweep(&root_of(lowers));
    Ok(n)
}

/// `nodes`: per node, a kind byte (`f` file, `x` executable, `l` symlink), the path, NUL.
fn encode_nodes(nodes: &[Node]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in nodes {
        out.push(match n.kind {
            NodeKind::File { executable: false } => b'f',
            NodeKind::File { executable: true } => b'x',
            NodeKind::Symlink => b'l',
        });
        out.extend_from_slice(n.rel.as_path().as_os_str().as_bytes());
        out.push(0);
    }
    out
}

fn decode_nodes(data: &[u8]) -> Option<Vec<Node>> {
    let mut out = Vec::new();
    if data.is_empty() {
        return Some(out);
    }
    let body = data.strip_suffix(&[0])?;
    for rec in body.split(|&b| b == 0) {
        let (&k, rel) = rec.split_first()?;
        let kind = match k {
            b'f' => NodeKind::File { executable: false },
            b'x' => NodeKind::File { executable: true },
            b'l' => NodeKind::Symlink,
            _ => return None,
        };
        out.push(Node {
            rel: RelPath::from_bytes(rel).ok()?,
            kind,
        });
    }
    // The base's nodes are sorted by path bytes; a listing that is not was not ours.
    out.windows(2)
        .all(|w| w[0].rel.as_bytes() < w[1].rel.as_bytes())
        .then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_round_trip() {
        let nodes = vec![
            Node {
                rel: RelPath::from_bytes(b"a b").unwrap(),
                kind: NodeKind::File { executable: true },
            },
            Node {
                rel: RelPath::from_bytes(b"d/l").unwrap(),
                kind: NodeKind::Symlink,
            },
            Node {
                rel: RelPath::from_bytes(b"d/x\n").unwrap(),
                kind: NodeKind::File { executable: false },
            },
        ];
        let back = decode_nodes(&encode_nodes(&nodes)).unwrap();
        assert_eq!(back.len(), 3);
        assert!(back
            .iter()
            .zip(&nodes)
            .all(|(a, b)| a.rel == b.rel && a.kind == b.kind));
        assert!(decode_nodes(b"qa\0").is_none());
        assert_eq!(decode_nodes(b"").map(|v| v.len()), Some(0));
    }
}
