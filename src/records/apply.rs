//! Records of applies and undos: what `patchbox apply`, `pending apply` and `apply --undo`
//! / `--list-undo` print with `--json`.

use serde::Serialize;

use super::path_str;
use crate::apply::store::{RecordState, UndoEntry, UndoLast};
use crate::apply::{ApplyReport, FileStatus, Outcome};

/// One file of an apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileResultRecord {
    /// The file (its new path; the old one for a deletion).
    pub path: String,
    /// The source of a rename or copy.
    pub old_path: Option<String>,
    /// `applied`, `merged`, `already_applied`, `conflict` or `refused`.
    pub status: &'static str,
    /// Offsets used, merge notes, the reason for a refusal.
    pub detail: String,
    /// The conflicting hunks, for `conflict`.
    pub conflicts: Vec<ConflictRecord>,
    /// True when written with conflict markers.
    pub markers_written: bool,
}

/// One hunk that could not be applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConflictRecord {
    /// 1-based hunk number within its file.
    pub hunk: usize,
    /// Its `@@ -a,b +c,d @@` header.
    pub header: String,
    /// Why it conflicts.
    pub reason: String,
}

/// An apply's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApplyRecord {
    /// `applied`, `applied_with_conflicts`, `already_applied` or `refused` (nothing written).
    pub outcome: &'static str,
    /// True in check mode: nothing was written.
    pub check_only: bool,
    /// True when the project was changed.
    pub wrote: bool,
    /// The undo record written (what `apply --drop-undo` takes), if any.
    pub undo_id: Option<String>,
    /// Per file, in patch order.
    pub files: Vec<FileResultRecord>,
    /// Non-fatal notes.
    pub warnings: Vec<String>,
    /// What the recovery run before it did, one line each (empty almost always).
    pub recovery: Vec<String>,
    /// The pending patch applied, for `pending apply`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_id: Option<String>,
    /// For a partial `pending apply`: the new pending patch holding the rest (`null` when
    /// nothing is left or nothing was applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<Option<String>>,
}

/// The JSON name of an outcome.
pub fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Applied => "applied",
        Outcome::AppliedWithConflicts => "applied_with_conflicts",
        Outcome::AlreadyApplied => "already_applied",
        Outcome::Refused => "refused",
    }
}

/// The JSON name of a file status.
pub fn status_name(s: FileStatus) -> &'static str {
    match s {
        FileStatus::Applied => "applied",
        FileStatus::Merged => "merged",
        FileStatus::AlreadyApplied => "already_applied",
        FileStatus::Conflict => "conflict",
        FileStatus::Refused => "refused",
    }
}

impl From<&ApplyReport> for ApplyRecord {
    fn from(r: &ApplyReport) -> Self {
        ApplyRecord {
            outcome: outcome_name(r.outcome),
            check_only: r.check_only,
            wrote: r.wrote(),
            undo_id: r
                .undo_dir
                .as_deref()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned()),
            files: r
                .files
                .iter()
                .map(|f| FileResultRecord {
                    path: f.path.to_string(),
                    old_path: f.old_path.as_ref().map(|p| p.to_string()),
                    status: status_name(f.status),
                    detail: f.detail.clone(),
                    conflicts: f
                        .conflicts
                        .iter()
                        .map(|c| ConflictRecord {
                            hunk: c.hunk,
                            header: c.header.clone(),
                            reason: c.reason.clone(),
                        })
                        .collect(),
                    markers_written: f.markers_written,
                })
                .collect(),
            warnings: r.warnings.clone(),
            recovery: recovery_lines(&r.recovery),
            pending_id: None,
            remaining: None,
        }
    }
}

fn recovery_lines(r: &crate::apply::RecoveryReport) -> Vec<String> {
    if r.is_empty() {
        return Vec::new();
    }
    r.to_string().lines().map(str::to_string).collect()
}

/// What `apply --undo` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UndoRecord {
    /// The undo record used (now removed).
    pub undo_id: String,
    /// Paths restored.
    pub restored: Vec<String>,
    /// Paths changed since the apply and overwritten anyway (`--force`).
    pub overwritten: Vec<String>,
    /// An interrupted undo of this record was completed; nothing more was undone.
    pub already_undone: bool,
    /// Non-fatal notes.
    pub warnings: Vec<String>,
    /// What the recovery run before it did, one line each.
    pub recovery: Vec<String>,
}

impl From<&UndoLast> for UndoRecord {
    fn from(u: &UndoLast) -> Self {
        let strs = |v: &[crate::RelPath]| v.iter().map(|p| p.to_string()).collect();
        UndoRecord {
            undo_id: u.record.id.clone(),
            restored: strs(&u.report.restored),
            overwritten: strs(&u.report.overwritten),
            already_undone: u.report.already_undone,
            warnings: u.report.warnings.clone(),
            recovery: recovery_lines(&u.report.recovery),
        }
    }
}

/// One undo record of `apply --list-undo`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UndoEntryRecord {
    /// Its id.
    pub id: String,
    /// The project it was made for.
    pub project: String,
    /// When the apply started.
    pub created_ms: u64,
    /// How many paths the apply changed.
    pub paths: usize,
    /// `applied`, `undone` or `incomplete`.
    pub state: &'static str,
}

impl From<&UndoEntry> for UndoEntryRecord {
    fn from(e: &UndoEntry) -> Self {
        UndoEntryRecord {
            id: e.id.clone(),
            project: path_str(&e.project),
            created_ms: e
                .created
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0),
            paths: e.paths,
            state: match e.state {
                RecordState::Applied => "applied",
                RecordState::Undone => "undone",
                RecordState::Incomplete => "incomplete",
            },
        }
    }
}
