//! Uploading what was kept: the local pending patches of a root sent to an object store.
//!
//! When a store could not be reached, the work was kept in the local pending store (today's
//! layout, with its pre-images). [`push`] sends each entry with its pre-images and removes
//! it locally only once its record is in the store. A push cut short and run again does not
//! store a patch twice: the entry claims its local name first, and finding the same patch
//! there counts as done.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::RemotePending;
use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::id::{DelegationId, SessionId};
use crate::session::pending::{self, PendingEntry};
use crate::tree::snapshot::NodeKind;

/// What a push did.
#[derive(Debug, Default)]
pub struct PushReport {
    /// `(local id, id in the store)` of each entry sent and removed locally.
    pub pushed: Vec<(String, String)>,
    /// `(local id, error)` of each entry that stays local.
    pub failed: Vec<(String, Error)>,
}

/// Sends every local pending patch under `root` (or only `only`, an id as
/// [`pending::find`] takes) to `store`, removing each from the local store once stored.
pub fn push(root: &Path, store: &RemotePending, only: Option<&str>) -> Result<PushReport> {
    let entries = match only {
        Some(id) => vec![pending::find(root, id)?],
        None => pending::list(root)?,
    };
    let mut report = PushReport::default();
    for e in entries {
        match push_one(root, store, &e) {
            Ok(id) => report.pushed.push((e.id.clone(), id)),
            Err(err) => report.failed.push((e.id.clone(), err)),
        }
    }
    Ok(report)
}

fn push_one(root: &Path, store: &RemotePending, e: &PendingEntry) -> Result<String> {
    let patch = std::fs::read(&e.patch_path).ctx("read pending patch", &e.patch_path)?;
    let mut meta = e.meta.clone();
    // The local name (`d1`, `d1.2`) is claimed first, so a second push finds it.
    meta.delegation = e.delegation().to_string();
    if meta.session.is_empty() {
        meta.session = e.session().to_string();
    }
    let paths = match &e.preimages {
        Some(dir) => tree_paths(dir)?,
        None => Vec::new(),
    };
    let read = |rel: &RelPath| -> Result<Option<(NodeKind, Vec<u8>)>> {
        let Some(dir) = &e.preimages else {
            return Ok(None);
        };
        read_node(&dir.join(rel.as_path()))
    };
    // Read from disk: the ids are parsed here.
    let delegation = DelegationId::parse(&meta.delegation)?;
    let session = SessionId::parse(&meta.session)?;
    let id = store.store_inner(
        &session,
        &delegation,
        &meta,
        &patch,
        e.preimages
            .as_ref()
            .map(|_| (paths.as_slice(), &read as pending::PreimageFn)),
        true,
    )?;
    pending::drop_pending(root, &e.id)?;
    Ok(id)
}

/// Every file and symlink under `dir`, relative to it.
fn tree_paths(dir: &Path) -> Result<Vec<RelPath>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).ctx("list pre-images", &d)? {
            let entry = entry.ctx("list pre-images", &d)?;
            let p = entry.path();
            let t = entry.file_type().ctx("inspect pre-image", &p)?;
            if t.is_dir() {
                todo.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(RelPath::new(rel)?);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A stored pre-image's kind and content.
fn read_node(p: &Path) -> Result<Option<(NodeKind, Vec<u8>)>> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::symlink_metadata(p).ctx("inspect pre-image", p)?;
    if m.file_type().is_symlink() {
        let t = std::fs::read_link(p).ctx("read pre-image symlink", p)?;
        return Ok(Some((NodeKind::Symlink, t.as_os_str().as_bytes().to_vec())));
    }
    let data = std::fs::read(p).ctx("read pre-image", p)?;
    let executable = m.permissions().mode() & 0o111 != 0;
    Ok(Some((NodeKind::File { executable }, data)))
}
