//! Records of the pending store and the sessions under a root: what `patchbox pending list`,
//! `pending show`, `sessions` and `run` print with `--json`.

use serde::Serialize;

use super::path_str;
use crate::error::{IoContext, Result};
use crate::patch::parse::parse_patch;
use crate::patch::stat::{file_stats, FileStat};
use crate::session::pending::PendingEntry;
use crate::session::provenance::Provenance;
use crate::session::recover::{PruneReport, SessionStatus};
use crate::session::remote::RemoteEntry;

/// One pending patch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingRecord {
    /// `<session>/<delegation>`: what `pending show|apply|drop` take.
    pub id: String,
    /// The session that produced it.
    pub session: String,
    /// Its name in the session (`<delegation>` or `<delegation>.<n>`).
    pub delegation: String,
    /// The project it applies to.
    pub project: String,
    /// Where it came from: `delegation` (stored by its session), `recovered` (from a
    /// session that died), `abandoned` (its manager ended with the sandbox open) or `split`
    /// (the rest of a partial apply).
    pub origin: &'static str,
    /// When it was stored.
    pub created_ms: u64,
    /// The pending patch it is the rest of, for `origin: split`.
    pub split_from: Option<String>,
    /// What produced it (every field `null` or empty when unknown).
    pub provenance: Provenance,
    /// Its files, in patch order.
    pub files: Vec<FileStat>,
    /// The patch file (its exact bytes).
    pub patch_file: String,
    /// The directory of pre-images stored with it, if any.
    pub preimages: Option<String>,
    /// The patch text (lossily UTF-8); only in `pending show`'s record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
}

impl PendingRecord {
    /// The record of entry `e`, reading its patch for the file summaries (a patch that does
    /// not parse has none); with `with_patch`, the text too.
    pub fn of(e: &PendingEntry, with_patch: bool) -> Result<PendingRecord> {
        let bytes = std::fs::read(&e.patch_path).ctx("read pending patch", &e.patch_path)?;
        let files = parse_patch(&bytes)
            .map(|p| file_stats(&p))
            .unwrap_or_default();
        let origin = if e.meta.split_from.is_some() {
            "split"
        } else if e.meta.recovered {
            "recovered"
        } else if e.meta.abandoned {
            "abandoned"
        } else {
            "delegation"
        };
        Ok(PendingRecord {
            id: e.id.clone(),
            session: e.session().to_string(),
            delegation: e.delegation().to_string(),
            project: path_str(&e.meta.project),
            origin,
            created_ms: e.meta.created.saturating_mul(1000),
            split_from: e.meta.split_from.clone(),
            provenance: e.meta.provenance.clone(),
            files,
            patch_file: path_str(&e.patch_path),
            preimages: e.preimages.as_deref().map(path_str),
            patch: with_patch.then(|| String::from_utf8_lossy(&bytes).into_owned()),
        })
    }
}

impl PendingRecord {
    /// The record of `e`, a pending patch in the object store at `url`, whose patch is
    /// `patch` (read and checked by [`RemotePending::patch_of`](crate::session::remote::RemotePending::patch_of)).
    /// Its `patch_file` is the patch object's address in the store and `preimages`, when it
    /// has some, the store's shared pre-image objects; `project` is the path on the machine
    /// that made it.
    pub fn of_stored(url: &str, e: &RemoteEntry, patch: &[u8], with_patch: bool) -> PendingRecord {
        let r = &e.record;
        let files = parse_patch(patch)
            .map(|p| file_stats(&p))
            .unwrap_or_default();
        let origin = if r.split_from.is_some() {
            "split"
        } else if r.recovered {
            "recovered"
        } else if r.abandoned {
            "abandoned"
        } else {
            "delegation"
        };
        let url = url.trim_end_matches('/');
        PendingRecord {
            id: e.id.clone(),
            session: r.session.clone(),
            delegation: r.name.clone(),
            project: String::from_utf8_lossy(&r.project_bytes()).into_owned(),
            origin,
            created_ms: r.created.saturating_mul(1000),
            split_from: r.split_from.clone(),
            provenance: r.provenance.clone(),
            files,
            patch_file: format!("{url}/{}", r.patch_key),
            preimages: (!r.preimages.is_empty()).then(|| {
                format!(
                    "{url}/{}",
                    crate::session::remote::preimages::OBJECTS_PREFIX
                )
            }),
            patch: with_patch.then(|| String::from_utf8_lossy(patch).into_owned()),
        }
    }
}

/// Every pending patch under `root`, oldest session first (what `pending list --json`
/// prints).
pub fn pending_records(root: &std::path::Path) -> Result<Vec<PendingRecord>> {
    crate::session::pending::list(root)?
        .iter()
        .map(|e| PendingRecord::of(e, false))
        .collect()
}

/// One session under a root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionRecord {
    /// The session id.
    pub id: String,
    /// Whether its owner still holds it.
    pub live: bool,
    /// The project it snapshots, if known.
    pub project: Option<String>,
    /// Its sandboxes (`d-*`).
    pub sandboxes: Vec<String>,
    /// How many pending patches it holds.
    pub pending: usize,
}

impl From<&SessionStatus> for SessionRecord {
    fn from(s: &SessionStatus) -> Self {
        SessionRecord {
            id: s.id.clone(),
            live: s.live,
            project: s.project.as_deref().map(path_str),
            sandboxes: s.sandboxes.clone(),
            pending: s.pending,
        }
    }
}

/// What `patchbox run --json` reports once the command ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    /// The session it ran in.
    pub session: String,
    /// The delegation id.
    pub delegation: String,
    /// The project.
    pub project: String,
    /// Where the patch went: `pending`, `file` or `none` (no changes).
    pub delivered: &'static str,
    /// The pending patch's id, when stored there.
    pub pending_id: Option<String>,
    /// The file written, with `--out`.
    pub patch_file: Option<String>,
    /// The files the command changed.
    pub files: Vec<FileStat>,
    /// The command, its directory, exit status and times.
    pub provenance: Provenance,
}

/// What `patchbox sessions prune --json` reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PruneRecord {
    /// The pending patches written from dead sessions' work.
    pub recovered: Vec<String>,
    /// Dead sessions whose sandboxes were removed.
    pub pruned: Vec<String>,
    /// Sessions left alone because they are alive.
    pub live: Vec<String>,
    /// Shared lower layers removed.
    pub shared_layers_removed: usize,
    /// Plan snapshots removed (no sandbox held them).
    pub snapshots_removed: usize,
    /// Problems met (the affected sandboxes were left in place).
    pub errors: Vec<String>,
}

impl From<&PruneReport> for PruneRecord {
    fn from(r: &PruneReport) -> Self {
        PruneRecord {
            recovered: r.recovered.iter().map(|p| path_str(p)).collect(),
            pruned: r.pruned.clone(),
            live: r.live.clone(),
            shared_layers_removed: r.shared_layers_removed,
            snapshots_removed: r.snapshots_removed,
            errors: r.errors.clone(),
        }
    }
}
