//! Applying a patch to the user's project from Python: `apply_patch`, `undo_apply`,
//! `recover_project`, and `UndoStore` (applies recorded under a sandbox root: list, undo the
//! last, drop, prune) — the Python face of `patchbox::apply` and `patchbox::apply::store`.
//!
//! Why: the session engines' own Python patch helper shells out to `git apply`; this one is
//! atomic (all files or none, also across a crash), handles drift with a 3-way merge and
//! keeps an undo record.
//!
//! Invariants: the options are keyword arguments with the Rust defaults (`strip=1`, nothing
//! else on); conflicts and refusals come back in the `ApplyReport`, only an unreadable patch,
//! a bad project or an I/O failure (after which the project is rolled back) raise
//! `PatchboxError`; every apply and undo runs with the GIL released.

use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use pyo3::prelude::*;

use crate::convert::{patch_bytes, root_of};
use crate::errors::lib_err;
use crate::report::{ApplyReport, RecoveryReport, UndoReport};
use patchbox::apply::store::{RecordState, UndoEntry, UndoStore as RsStore};
use patchbox::apply::{self as rs, ApplyOptions};

/// The options shared by every apply entry point.
pub(crate) fn options(
    check: bool,
    preimages: Option<PathBuf>,
    conflict_markers: bool,
    undo_dir: Option<PathBuf>,
    strip: usize,
    allow_outside_symlinks: bool,
) -> ApplyOptions {
    // Every field the extension's build has is set; a build of the library with the test
    // feature `fault-injection` has more, left at their defaults.
    #[allow(clippy::needless_update)]
    ApplyOptions {
        check,
        preimages,
        conflict_markers,
        undo_dir,
        strip,
        allow_outside_symlinks,
        ..ApplyOptions::default()
    }
}

/// Applies `patch` (bytes or str: `git diff [--binary]`, this library's, or `diff -u`) to
/// `project` atomically. `check`: plan only, write nothing. `preimages`: a directory of the
/// original files, for a 3-way merge when the project drifted. `conflict_markers`: write
/// overlapping edits with markers instead of refusing. `undo_dir`: record what is replaced,
/// for `undo_apply`. `strip`: leading path components to drop (`-p`).
#[pyfunction]
#[pyo3(signature = (project, patch, *, check=false, preimages=None, conflict_markers=false, undo_dir=None, strip=1, allow_outside_symlinks=false))]
#[allow(clippy::too_many_arguments)]
fn apply_patch(
    py: Python<'_>,
    project: PathBuf,
    patch: &Bound<'_, PyAny>,
    check: bool,
    preimages: Option<PathBuf>,
    conflict_markers: bool,
    undo_dir: Option<PathBuf>,
    strip: usize,
    allow_outside_symlinks: bool,
) -> PyResult<ApplyReport> {
    let patch = patch_bytes(patch)?;
    let opts = options(
        check,
        preimages,
        conflict_markers,
        undo_dir,
        strip,
        allow_outside_symlinks,
    );
    py.detach(|| rs::apply_patch(&project, &patch, &opts))
        .map(ApplyReport::from)
        .map_err(lib_err)
}

/// Restores `project` to its state before the apply recorded in `undo_dir`. Refused
/// (`kind == "apply_failed"`, naming the files) when files changed since, unless `force`.
#[pyfunction]
#[pyo3(signature = (project, undo_dir, *, force=false))]
fn undo_apply(
    py: Python<'_>,
    project: PathBuf,
    undo_dir: PathBuf,
    force: bool,
) -> PyResult<UndoReport> {
    py.detach(|| rs::undo_apply(&project, &undo_dir, force))
        .map(UndoReport::from)
        .map_err(lib_err)
}

/// Finishes or rolls back every apply or undo interrupted in `project` (a crash).
#[pyfunction]
fn recover_project(py: Python<'_>, project: PathBuf) -> PyResult<RecoveryReport> {
    py.detach(|| rs::recover_project(&project))
        .map(RecoveryReport::from)
        .map_err(lib_err)
}

/// One undo record in an `UndoStore`.
#[pyclass(name = "UndoRecord", module = "patchbox._native", frozen, get_all)]
pub(crate) struct UndoRecord {
    /// Its id (a ULID).
    id: String,
    /// Its directory.
    dir: PathBuf,
    /// The project it was made for.
    project: PathBuf,
    /// When the apply started, seconds since the Unix epoch.
    created: f64,
    /// How many paths the apply changed.
    paths: usize,
    /// `"applied"` (can be undone), `"undone"` or `"incomplete"`.
    state: &'static str,
}

impl From<UndoEntry> for UndoRecord {
    fn from(e: UndoEntry) -> Self {
        UndoRecord {
            created: e
                .created
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            state: match e.state {
                RecordState::Applied => "applied",
                RecordState::Undone => "undone",
                RecordState::Incomplete => "incomplete",
            },
            id: e.id,
            dir: e.dir,
            project: e.project,
            paths: e.paths,
        }
    }
}

#[pymethods]
impl UndoRecord {
    fn __repr__(&self) -> String {
        format!(
            "UndoRecord(id={:?}, project={:?}, paths={}, state={:?})",
            self.id, self.project, self.paths, self.state
        )
    }
}

/// The undo records under `<root>/undo/`: applies made through it can be undone later, the
/// newest first (the store keeps the newest 50 per project, none older than 30 days).
#[pyclass(name = "UndoStore", module = "patchbox._native", frozen)]
pub(crate) struct UndoStore {
    inner: RsStore,
}

#[pymethods]
impl UndoStore {
    /// The store of the sandbox root `root` (default: the library's default root).
    #[new]
    #[pyo3(signature = (root=None))]
    fn new(root: Option<PathBuf>) -> PyResult<Self> {
        let root = root_of(root).map_err(lib_err)?;
        Ok(UndoStore {
            inner: RsStore::new(root),
        })
    }

    /// The directory holding the records.
    #[getter]
    fn dir(&self) -> PathBuf {
        self.inner.dir().to_path_buf()
    }

    /// `apply_patch` with an undo record in the store (then prunes the store).
    #[pyo3(signature = (project, patch, *, check=false, preimages=None, conflict_markers=false, strip=1, allow_outside_symlinks=false))]
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        py: Python<'_>,
        project: PathBuf,
        patch: &Bound<'_, PyAny>,
        check: bool,
        preimages: Option<PathBuf>,
        conflict_markers: bool,
        strip: usize,
        allow_outside_symlinks: bool,
    ) -> PyResult<ApplyReport> {
        let patch = patch_bytes(patch)?;
        let opts = options(
            check,
            preimages,
            conflict_markers,
            None,
            strip,
            allow_outside_symlinks,
        );
        py.detach(|| self.inner.apply(&project, &patch, &opts))
            .map(ApplyReport::from)
            .map_err(lib_err)
    }

    /// Every record (of `project`, if given), oldest first.
    #[pyo3(signature = (project=None))]
    fn list(&self, py: Python<'_>, project: Option<PathBuf>) -> PyResult<Vec<UndoRecord>> {
        let v = py
            .detach(|| self.inner.list(project.as_deref()))
            .map_err(lib_err)?;
        Ok(v.into_iter().map(UndoRecord::from).collect())
    }

    /// Undoes the newest applied record of `project`, then drops it; `(record, report)`.
    /// Raises `PatchboxError` (kind `"pending"`) when there is nothing to undo.
    #[pyo3(signature = (project, *, force=false))]
    fn undo_last(
        &self,
        py: Python<'_>,
        project: PathBuf,
        force: bool,
    ) -> PyResult<(UndoRecord, UndoReport)> {
        let u = py
            .detach(|| self.inner.undo_last(&project, force))
            .map_err(lib_err)?;
        Ok((u.record.into(), u.report.into()))
    }

    /// Undoes the record `id` on `project`, then drops it.
    #[pyo3(signature = (project, id, *, force=false))]
    fn undo(
        &self,
        py: Python<'_>,
        project: PathBuf,
        id: &str,
        force: bool,
    ) -> PyResult<UndoReport> {
        py.detach(|| self.inner.undo(&project, id, force))
            .map(UndoReport::from)
            .map_err(lib_err)
    }

    /// Removes the record `id`.
    fn drop(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        py.detach(|| self.inner.drop_record(id)).map_err(lib_err)
    }

    /// Prunes the store by its policy; returns the ids removed.
    fn prune(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.prune()).map_err(lib_err)
    }

    fn __repr__(&self) -> String {
        format!("UndoStore(dir={:?})", self.inner.dir())
    }
}

/// Adds the classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(apply_patch, m)?)?;
    m.add_function(wrap_pyfunction!(undo_apply, m)?)?;
    m.add_function(wrap_pyfunction!(recover_project, m)?)?;
    m.add_class::<UndoRecord>()?;
    m.add_class::<UndoStore>()?;
    Ok(())
}
