//! Overlay isolation on disk: what an overlay sandbox of a session is made of, and how its
//! changes are read — by the manager's finalize and by crash recovery alike.
//!
//! An overlay sandbox `d-<id>/` is a mount whose layers all live in the session directory:
//!
//! ```text
//! d-<id>/             the mount point: the directory tools work in
//! .upper-<id>/        the upper layer: everything the delegation wrote
//! .work-<id>/         OverlayFS's work directory
//! .layer-<ulid>/ …    frozen layers (chained sandboxes), top first: a predecessor's former
//!                     upper layer (an idle one lends it), or a copy of it
//! .lower/             the session snapshot materialized whole: the lowest layer of all
//! .overlay-<id>       the record: backend, then the frozen layers' names, top first
//! ```
//!
//! The record is written before anything is mounted on `d-<id>/`, so recovery never takes an
//! empty mount point for a delegation that deleted everything.
//!
//! The changes against the snapshot are the union of what the upper layer and the frozen
//! layers touched (every difference from `.lower/` was written in one of them), each read
//! from the view: see [`crate::tree::overlay_diff`].

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::overlay::mount::Backend;
use crate::fs::overlay::upper::{self, UpperScan};
use crate::fs::RelPath;
use crate::session::layout;
use crate::tree::diff::{self, BaseSource, TreeDiff};
use crate::tree::overlay_diff;
use crate::tree::snapshot::Node;

/// What `.overlay-<id>` records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The backend that mounted it.
    pub backend: Backend,
    /// The frozen layers stacked over `.lower/`, top first (names in the session directory).
    pub layers: Vec<String>,
}

/// The record's name for a backend.
pub fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Kernel => "kernel",
        Backend::Fuse => "fuse",
    }
}

impl Record {
    /// The record as stored: the backend, then one layer name a line.
    ///
    /// ```
    /// use patchbox::fs::overlay::mount::Backend;
    /// use patchbox::session::overlay::Record;
    /// let r = Record { backend: Backend::Fuse, layers: vec![".layer-A".into()] };
    /// assert_eq!(Record::decode(&r.encode()), Some(r));
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("{}\n", backend_name(self.backend));
        for l in &self.layers {
            s.push_str(l);
            s.push('\n');
        }
        s.into_bytes()
    }

    /// Reads a record back; `None` when it is not one (a layer name must be a frozen
    /// layer's).
    pub fn decode(data: &[u8]) -> Option<Record> {
        let text = std::str::from_utf8(data).ok()?;
        let mut lines = text.lines();
        let backend = match lines.next()? {
            "kernel" => Backend::Kernel,
            "fuse" => Backend::Fuse,
            _ => return None,
        };
        let layers: Vec<String> = lines.map(str::to_string).collect();
        if layers
            .iter()
            .any(|l| !l.starts_with(layout::LAYER_PREFIX) || l.contains('/'))
        {
            return None;
        }
        Some(Record { backend, layers })
    }
}

/// The merged scan of an overlay's upper layer and its frozen layers.
pub fn scan_layers(upper: &Path, layers: &[PathBuf], backend: Backend) -> Result<UpperScan> {
    let fuse = backend == Backend::Fuse;
    let mut scan = upper::scan(upper, fuse)?;
    for l in layers {
        scan.merge(upper::scan(l, fuse)?);
    }
    Ok(scan)
}

/// The diff of the mounted `view` against the base, read from the layers' scan; when the
/// scan cannot tell (a redirected directory), the whole view is listed as for a copy.
pub fn diff_view(
    nodes: &[Node],
    src: &dyn BaseSource,
    view: &Path,
    scan: &UpperScan,
    is_ignored: &dyn Fn(&RelPath) -> bool,
) -> Result<TreeDiff> {
    if scan.redirected {
        return diff::diff_trees(nodes, src, view, None, is_ignored);
    }
    overlay_diff::diff_scan(nodes, src, view, scan, is_ignored)
}

/// The layers of the sandbox `id` as recorded, for mounting: lower layers top first
/// (`.lower/`, then the shared layer it stands on if the session uses one, last), upper,
/// work. The first `rec.layers.len()` lower layers are the frozen ones.
pub fn layers_of(session: &Path, id: &str, rec: &Record) -> crate::fs::overlay::mount::Layers {
    let mut lower: Vec<PathBuf> = rec.layers.iter().map(|l| session.join(l)).collect();
    lower.push(session.join(layout::LOWER_DIR));
    if let Some(shared) = crate::isolation::shared_lower::named_by(session) {
        lower.push(shared);
    }
    crate::fs::overlay::mount::Layers {
        lower,
        upper: session.join(format!("{}{id}", layout::UPPER_PREFIX)),
        work: session.join(format!("{}{id}", layout::WORK_PREFIX)),
        rename_dirs: true,
    }
}

/// Reads the record of the sandbox `id`; `Ok(None)` when it has none (a copy).
pub fn read_record(session: &Path, id: &str) -> Result<Option<Record>> {
    let p = session.join(format!("{}{id}", layout::OVERLAY_PREFIX));
    match std::fs::read(&p) {
        Ok(b) => Record::decode(&b).map(Some).ok_or_else(|| {
            Error::io(
                "read overlay record",
                &p,
                std::io::Error::new(std::io::ErrorKind::InvalidData, "not an overlay record"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read overlay record", &p, e)),
    }
}

/// [`read_record`] for recovery after a crash, a power loss included. A fresh sandbox's
/// record (no frozen layers) is written without `fsync` (see `build_overlay`), so a power
/// loss may lose it or leave it empty; every other record is durable before its mount point
/// exists. A missing or empty record is therefore a fresh sandbox's when its upper layer
/// `.upper-<id>` exists (or the record file does): its layers are `.lower/` alone, and the
/// backend is tried in turn by the caller. A missing record and no upper layer: a copy
/// sandbox (`None`). A non-empty record that does not decode stays an error (it was synced,
/// so something else damaged it; nothing is guessed).
pub fn read_record_for_recovery(session: &Path, id: &str) -> Result<Option<Record>> {
    let p = session.join(format!("{}{id}", layout::OVERLAY_PREFIX));
    let fresh = Record {
        backend: Backend::Kernel,
        layers: Vec::new(),
    };
    match std::fs::symlink_metadata(&p) {
        Ok(md) if md.is_file() && md.len() == 0 => return Ok(Some(fresh)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let upper = session.join(format!("{}{id}", layout::UPPER_PREFIX));
            return Ok(std::fs::symlink_metadata(&upper)
                .is_ok_and(|m| m.is_dir())
                .then_some(fresh));
        }
        _ => {}
    }
    read_record(session, id)
}

/// Unmounts whatever a session entry `name` has mounted (a sandbox `d-*` or a probe's
/// mount point), as a crash may have left it; other entries have nothing mounted.
pub fn unmount_entry(session: &Path, name: &str) -> Result<()> {
    let mnt = if name.starts_with("d-") {
        session.join(name)
    } else if name.starts_with(layout::PROBE_PREFIX) {
        session.join(name).join("m")
    } else {
        return Ok(());
    };
    if crate::fs::overlay::mountinfo::is_mounted(&mnt)? {
        crate::fs::overlay::mount::unmount(&mnt, true, None)?;
    }
    Ok(())
}

/// Unmounts every mount below the session directory (deepest first), whatever made it: a
/// session is never removed, nor recovered, with something of it still mounted.
pub fn unmount_all_below(session: &Path) -> Result<()> {
    for mnt in crate::fs::overlay::mountinfo::mounts_below(session)? {
        crate::fs::overlay::mount::unmount(&mnt, true, None)?;
    }
    Ok(())
}
