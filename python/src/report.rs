//! What an apply answers, for Python: `ApplyReport` (one `FileReport` per file patch, each
//! with its `FileStatus` and `HunkConflict`s), the overall `Outcome`, `UndoReport` and
//! `RecoveryReport` — the Python face of `patchbox::apply::{ApplyReport, UndoReport, …}`.
//!
//! Why a file of its own: the plain apply, the undo store and the pending store all answer
//! with these.
//!
//! Invariants: a conflict or a refusal is data here, never an exception (`outcome` says
//! whether anything was written; `Outcome.REFUSED` always means nothing was); `str(report)`
//! is the Rust `Display`, the summary the command line prints; the classes are frozen.

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::prelude::*;

use crate::convert::rel;
use patchbox::apply::{self as rs, RecoveryAction};

/// What happened (or, in check mode, would happen) to one file.
#[pyclass(name = "FileStatus", module = "patchbox._native", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FileStatus {
    /// Applied with exact context (possibly at an offset).
    #[pyo3(name = "APPLIED")]
    Applied,
    /// Applied by a 3-way merge with the pre-image.
    #[pyo3(name = "MERGED")]
    Merged,
    /// The project already has the patch's result for this file.
    #[pyo3(name = "ALREADY_APPLIED")]
    AlreadyApplied,
    /// The patch's changes overlap local changes.
    #[pyo3(name = "CONFLICT")]
    Conflict,
    /// Refused for safety or because the change is not supported.
    #[pyo3(name = "REFUSED")]
    Refused,
}

impl From<rs::FileStatus> for FileStatus {
    fn from(s: rs::FileStatus) -> Self {
        match s {
            rs::FileStatus::Applied => FileStatus::Applied,
            rs::FileStatus::Merged => FileStatus::Merged,
            rs::FileStatus::AlreadyApplied => FileStatus::AlreadyApplied,
            rs::FileStatus::Conflict => FileStatus::Conflict,
            rs::FileStatus::Refused => FileStatus::Refused,
        }
    }
}

impl From<FileStatus> for rs::FileStatus {
    fn from(s: FileStatus) -> Self {
        match s {
            FileStatus::Applied => rs::FileStatus::Applied,
            FileStatus::Merged => rs::FileStatus::Merged,
            FileStatus::AlreadyApplied => rs::FileStatus::AlreadyApplied,
            FileStatus::Conflict => rs::FileStatus::Conflict,
            FileStatus::Refused => rs::FileStatus::Refused,
        }
    }
}

#[pymethods]
impl FileStatus {
    /// The status as the report prints it (`"already applied"`).
    fn __str__(&self) -> String {
        rs::FileStatus::from(*self).to_string()
    }
}

/// The overall result of an apply.
#[pyclass(name = "Outcome", module = "patchbox._native", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Outcome {
    /// Every file was applied or already applied; something was (would be) written.
    #[pyo3(name = "APPLIED")]
    Applied,
    /// Written, but some text files contain conflict markers.
    #[pyo3(name = "APPLIED_WITH_CONFLICTS")]
    AppliedWithConflicts,
    /// Every file already had the patch's result; nothing written.
    #[pyo3(name = "ALREADY_APPLIED")]
    AlreadyApplied,
    /// Nothing was written: some file conflicts or was refused.
    #[pyo3(name = "REFUSED")]
    Refused,
}

impl From<rs::Outcome> for Outcome {
    fn from(o: rs::Outcome) -> Self {
        match o {
            rs::Outcome::Applied => Outcome::Applied,
            rs::Outcome::AppliedWithConflicts => Outcome::AppliedWithConflicts,
            rs::Outcome::AlreadyApplied => Outcome::AlreadyApplied,
            rs::Outcome::Refused => Outcome::Refused,
        }
    }
}

/// One hunk that could not be applied.
#[pyclass(name = "HunkConflict", module = "patchbox._native", frozen, get_all)]
pub(crate) struct HunkConflict {
    /// 1-based index of the hunk within its file patch.
    hunk: usize,
    /// The hunk header, `@@ -a,b +c,d @@`.
    header: String,
    /// Why it conflicts.
    reason: String,
}

#[pymethods]
impl HunkConflict {
    fn __repr__(&self) -> String {
        format!(
            "HunkConflict(hunk={}, header={:?}, reason={:?})",
            self.hunk, self.header, self.reason
        )
    }
}

/// The result for one file patch.
#[pyclass(name = "FileReport", module = "patchbox._native", frozen)]
pub(crate) struct FileReport {
    inner: rs::FileReport,
}

#[pymethods]
impl FileReport {
    /// The file, relative to the project (its new path; the old one for a deletion).
    #[getter]
    fn path(&self) -> OsString {
        rel(self.inner.path.as_path())
    }

    /// The source path of a rename or copy.
    #[getter]
    fn old_path(&self) -> Option<OsString> {
        self.inner.old_path.as_ref().map(|p| rel(p.as_path()))
    }

    /// What happened.
    #[getter]
    fn status(&self) -> FileStatus {
        self.inner.status.into()
    }

    /// Offsets used, merge notes, the reason for a refusal.
    #[getter]
    fn detail(&self) -> &str {
        &self.inner.detail
    }

    /// For `FileStatus.CONFLICT`: the conflicting hunks.
    #[getter]
    fn conflicts(&self) -> Vec<HunkConflict> {
        self.inner
            .conflicts
            .iter()
            .map(|c| HunkConflict {
                hunk: c.hunk,
                header: c.header.clone(),
                reason: c.reason.clone(),
            })
            .collect()
    }

    /// True when the file was (would be) written with conflict markers.
    #[getter]
    fn markers_written(&self) -> bool {
        self.inner.markers_written
    }

    fn __repr__(&self) -> String {
        format!(
            "FileReport(path={:?}, status={})",
            self.inner.path.to_string(),
            self.inner.status
        )
    }
}

/// What the recovery run before an apply or undo found: interrupted transactions rolled
/// forward or back.
#[pyclass(name = "RecoveryReport", module = "patchbox._native", frozen)]
pub(crate) struct RecoveryReport {
    inner: rs::RecoveryReport,
}

impl From<rs::RecoveryReport> for RecoveryReport {
    fn from(inner: rs::RecoveryReport) -> Self {
        RecoveryReport { inner }
    }
}

#[pymethods]
impl RecoveryReport {
    /// `(staging directory name, action)` per interrupted transaction, action one of
    /// `"rolled_back"`, `"rolled_forward"`, `"cleaned_up"`.
    #[getter]
    fn recovered(&self) -> Vec<(String, &'static str)> {
        self.inner
            .recovered
            .iter()
            .map(|t| {
                let action = match t.action {
                    RecoveryAction::RolledBack => "rolled_back",
                    RecoveryAction::RolledForward => "rolled_forward",
                    RecoveryAction::CleanedUp => "cleaned_up",
                };
                (t.name.clone(), action)
            })
            .collect()
    }

    /// Non-fatal notes.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// True when there was nothing to recover.
    fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }
}

/// The result of an apply: one `FileReport` per file patch, in patch order.
#[pyclass(name = "ApplyReport", module = "patchbox._native", frozen)]
pub(crate) struct ApplyReport {
    inner: rs::ApplyReport,
}

impl From<rs::ApplyReport> for ApplyReport {
    fn from(inner: rs::ApplyReport) -> Self {
        ApplyReport { inner }
    }
}

#[pymethods]
impl ApplyReport {
    /// Per file patch, in order.
    #[getter]
    fn files(&self) -> Vec<FileReport> {
        self.inner
            .files
            .iter()
            .map(|f| FileReport { inner: f.clone() })
            .collect()
    }

    /// The overall outcome.
    #[getter]
    fn outcome(&self) -> Outcome {
        self.inner.outcome.into()
    }

    /// True when made in check mode: nothing was written.
    #[getter]
    fn check_only(&self) -> bool {
        self.inner.check_only
    }

    /// The undo record written, if any.
    #[getter]
    fn undo_dir(&self) -> Option<PathBuf> {
        self.inner.undo_dir.clone()
    }

    /// Non-fatal notes.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// What the recovery run before the apply found.
    #[getter]
    fn recovery(&self) -> RecoveryReport {
        self.inner.recovery.clone().into()
    }

    /// True unless the patch was refused.
    fn is_ok(&self) -> bool {
        self.inner.is_ok()
    }

    /// True when this call modified the project.
    fn wrote(&self) -> bool {
        self.inner.wrote()
    }

    /// The report as the JSON record `patchbox apply --json` prints (see `docs/json.md`).
    fn to_json(&self) -> String {
        patchbox::records::to_json(&patchbox::records::ApplyRecord::from(&self.inner))
    }

    /// How many files have `status`.
    fn count(&self, status: FileStatus) -> usize {
        self.inner.count(status.into())
    }

    /// The human-readable summary, one line per file and a closing line.
    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "ApplyReport(outcome={:?}, files={})",
            self.inner.outcome,
            self.inner.files.len()
        )
    }
}

/// The result of an undo.
#[pyclass(name = "UndoReport", module = "patchbox._native", frozen)]
pub(crate) struct UndoReport {
    inner: rs::UndoReport,
}

impl From<rs::UndoReport> for UndoReport {
    fn from(inner: rs::UndoReport) -> Self {
        UndoReport { inner }
    }
}

#[pymethods]
impl UndoReport {
    /// Paths restored to their state before the apply.
    #[getter]
    fn restored(&self) -> Vec<OsString> {
        self.inner
            .restored
            .iter()
            .map(|p| rel(p.as_path()))
            .collect()
    }

    /// Paths changed since the apply and overwritten anyway (`force=True`).
    #[getter]
    fn overwritten(&self) -> Vec<OsString> {
        self.inner
            .overwritten
            .iter()
            .map(|p| rel(p.as_path()))
            .collect()
    }

    /// The record had already been used; nothing was done.
    #[getter]
    fn already_undone(&self) -> bool {
        self.inner.already_undone
    }

    /// Non-fatal notes.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// What the recovery run before the undo found.
    #[getter]
    fn recovery(&self) -> RecoveryReport {
        self.inner.recovery.clone().into()
    }

    fn __repr__(&self) -> String {
        format!(
            "UndoReport(restored={}, overwritten={}, already_undone={})",
            self.inner.restored.len(),
            self.inner.overwritten.len(),
            self.inner.already_undone
        )
    }
}

/// Adds the classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FileStatus>()?;
    m.add_class::<Outcome>()?;
    m.add_class::<HunkConflict>()?;
    m.add_class::<FileReport>()?;
    m.add_class::<RecoveryReport>()?;
    m.add_class::<ApplyReport>()?;
    m.add_class::<UndoReport>()?;
    Ok(())
}
