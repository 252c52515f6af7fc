//! Accepting part of a pending patch: some of its files, some hunks of a file. The chosen
//! part is applied as a whole apply would be (atomically, 3-way against the stored
//! pre-images, with an undo record); the rest stays pending as a new entry with its own
//! pre-images, which applies later or is dropped.
//!
//! Order of the steps, and what a crash between them leaves: the chosen part is applied
//! first; then the rest is stored as a new entry (`<delegation>.<n>`, its meta naming the
//! entry it was split from); then the original entry is dropped. A crash before the drop
//! leaves the original pending too: it still describes the whole work (applying it again
//! finds the chosen part already applied), so nothing is lost, only shown twice.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::apply::store::UndoStore;
use crate::apply::{ApplyOptions, ApplyReport, Outcome};
use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::patch::model::{MODE_EXECUTABLE, MODE_FILE, MODE_SYMLINK};
use crate::patch::select::{self, Preimage, SelectError, Selection};
use crate::session::pending::{self, PendingMeta};
use crate::tree::snapshot::NodeKind;

/// What [`apply_pending_selected`] did.
#[derive(Clone, Debug)]
pub struct PartialApply {
    /// The apply of the chosen part.
    pub report: ApplyReport,
    /// The pending entry now holding the rest (`<session>/<delegation>.<n>`): `None` when
    /// nothing is left, or nothing was applied (check mode, a refusal: the original entry
    /// stays as it was).
    pub remaining: Option<String>,
}

/// Applies the part of pending patch `id` that `selection` chooses to its project (or
/// `project`), keeping the rest pending; see the [module docs](self). With an empty
/// selection this is [`pending::apply_pending`].
///
/// Errors: [`Error::Pending`] for an unknown id or a selection that cannot be made (a
/// pathspec that matches nothing, a hunk past the file's last, hunks of a binary or renamed
/// file, a file without a stored pre-image), besides the errors of an apply.
pub fn apply_pending_selected(
    root: &Path,
    id: &str,
    project: Option<&Path>,
    selection: &Selection,
    options: &ApplyOptions,
) -> Result<PartialApply> {
    if selection.is_everything() {
        let report = pending::apply_pending(root, id, project, options)?;
        return Ok(PartialApply {
            report,
            remaining: None,
        });
    }
    let e = pending::find(root, id)?;
    let text = std::fs::read(&e.patch_path).ctx("read pending patch", &e.patch_path)?;
    let pre_dir = options.preimages.clone().or_else(|| e.preimages.clone());
    let read = |rel: &RelPath| read_preimage(pre_dir.as_deref(), rel);
    let split = select::split(&text, selection, &read).map_err(|err| match err {
        SelectError::Core(c) => c,
        other => Error::Pending {
            id: e.id.clone(),
            reason: other.to_string(),
        },
    })?;
    let project = project.unwrap_or(&e.meta.project);
    let mut opts = options.clone();
    opts.preimages = pre_dir.clone();
    let report = UndoStore::new(root).apply(project, &split.chosen, &opts)?;
    let applied = matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied);
    if !applied || options.check {
        return Ok(PartialApply {
            report,
            remaining: None,
        });
    }
    let remaining = if split.rest.is_empty() {
        None
    } else {
        let meta = PendingMeta {
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            split_from: Some(e.id.clone()),
            ..e.meta.clone()
        };
        let meta = PendingMeta {
            session: e.session().to_string(),
            delegation: base_delegation(&meta, e.delegation()),
            ..meta
        };
        let read_rest = |rel: &RelPath| -> Result<Option<(NodeKind, Vec<u8>)>> {
            let pre = match split.rest_preimages.iter().find(|(p, _)| p == rel) {
                Some((_, pre)) => Some(pre.clone()),
                None => read_preimage(pre_dir.as_deref(), rel)?,
            };
            Ok(pre.map(|(mode, data)| (node_kind(mode), data)))
        };
        let session_dir = root.join(e.session());
        let file = pending::write_pending(
            &session_dir,
            &meta,
            &split.rest,
            Some((&split.rest_paths, &read_rest)),
        )?;
        let name = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Some(format!("{}/{name}", e.session()))
    };
    pending::drop_pending(root, &e.id)?;
    Ok(PartialApply { report, remaining })
}

/// The delegation id the rest is stored under: the meta's (`d1` for `d1.2` too), else the
/// entry's name without its `.<n>` suffix.
fn base_delegation(meta: &PendingMeta, name: &str) -> String {
    if !meta.delegation.is_empty() {
        return meta.delegation.clone();
    }
    match name.rsplit_once('.') {
        Some((stem, n)) if n.bytes().all(|b| b.is_ascii_digit()) => stem.to_string(),
        _ => name.to_string(),
    }
}

/// The git mode's node kind.
fn node_kind(mode: u32) -> NodeKind {
    if mode == MODE_SYMLINK {
        NodeKind::Symlink
    } else {
        NodeKind::File {
            executable: mode == MODE_EXECUTABLE,
        }
    }
}

/// The pre-image of `rel` stored in `dir`: its git mode and contents (a symlink's target);
/// `None` when there is no directory or no such entry (the file is new).
fn read_preimage(dir: Option<&Path>, rel: &RelPath) -> Result<Option<Preimage>> {
    use std::os::unix::fs::PermissionsExt;
    let Some(dir) = dir else { return Ok(None) };
    let path: PathBuf = dir.join(rel.as_path());
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read pre-image", &path, e)),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&path).ctx("read pre-image", &path)?;
        return Ok(Some((MODE_SYMLINK, target.as_os_str().as_bytes().to_vec())));
    }
    if !meta.is_file() {
        return Ok(None);
    }
    let data = std::fs::read(&path).ctx("read pre-image", &path)?;
    let mode = if meta.permissions().mode() & 0o100 != 0 {
        MODE_EXECUTABLE
    } else {
        MODE_FILE
    };
    Ok(Some((mode, data)))
}
