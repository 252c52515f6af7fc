//! The pending store from Python: `list_pending`, `read_pending`, `apply_pending`,
//! `drop_pending` and the `PendingPatch` entries — the Python face of
//! `patchbox::session::pending`.
//!
//! Why: patches nobody accepted yet (rejected, recovered after a crash, abandoned by a
//! manager that ended with a sandbox open) wait under `<root>/<session>/pending/` for review;
//! an engine lists, shows, applies or drops them without a shell.
//!
//! Invariants: ids are `<session-id>/<delegation-id>`, or a delegation id only one pending
//! patch has; a pending patch leaves the store only through `drop_pending` or an
//! `apply_pending` that applied it for real; the work runs with the GIL released.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::apply::options;
use crate::convert::root_of;
use crate::errors::lib_err;
use crate::report::ApplyReport;
use patchbox::session::pending::{self, PendingEntry};

/// One pending patch found on disk.
#[pyclass(name = "PendingPatch", module = "patchbox._native", frozen, get_all)]
pub(crate) struct PendingPatch {
    /// `<session-id>/<delegation-id>`, unique under a root.
    id: String,
    /// The session that produced it.
    session: String,
    /// The delegation (its pending name: `<id>`, `<id>.2`, …).
    delegation: String,
    /// The patch file.
    patch_path: PathBuf,
    /// The base versions of the files it touches (for a 3-way apply), if stored.
    preimages: Option<PathBuf>,
    /// The project it applies to.
    project: PathBuf,
    /// When it was stored, seconds since the Unix epoch.
    created: u64,
    /// Recovered from a session that died before finishing.
    recovered: bool,
    /// Its manager ended with the sandbox neither completed nor discarded.
    abandoned: bool,
}

impl From<PendingEntry> for PendingPatch {
    fn from(e: PendingEntry) -> Self {
        PendingPatch {
            session: e.session().to_string(),
            delegation: e.delegation().to_string(),
            id: e.id,
            patch_path: e.patch_path,
            preimages: e.preimages,
            project: e.meta.project,
            created: e.meta.created,
            recovered: e.meta.recovered,
            abandoned: e.meta.abandoned,
        }
    }
}

#[pymethods]
impl PendingPatch {
    fn __repr__(&self) -> String {
        format!(
            "PendingPatch(id={:?}, project={:?}, recovered={}, abandoned={})",
            self.id, self.project, self.recovered, self.abandoned
        )
    }
}

/// Every pending patch under `root`, oldest session first.
#[pyfunction]
#[pyo3(signature = (root=None))]
fn list_pending(py: Python<'_>, root: Option<PathBuf>) -> PyResult<Vec<PendingPatch>> {
    let v = py
        .detach(|| root_of(root).and_then(|r| pending::list(&r)))
        .map_err(lib_err)?;
    Ok(v.into_iter().map(PendingPatch::from).collect())
}

/// The bytes of the pending patch `id`.
#[pyfunction]
#[pyo3(signature = (id, *, root=None))]
fn read_pending<'py>(
    py: Python<'py>,
    id: &str,
    root: Option<PathBuf>,
) -> PyResult<Bound<'py, PyBytes>> {
    let b = py
        .detach(|| root_of(root).and_then(|r| pending::read(&r, id)))
        .map_err(lib_err)?;
    Ok(PyBytes::new(py, &b))
}

/// Applies the pending patch `id` to its project (or `project`), merging 3-way against the
/// pre-images stored with it, with an undo record in the root's `UndoStore`. Applied for
/// real (not `check`), it leaves the pending store; a conflict keeps it pending.
#[pyfunction]
#[pyo3(signature = (id, project=None, *, root=None, check=false, preimages=None, conflict_markers=false, strip=1, allow_outside_symlinks=false))]
#[allow(clippy::too_many_arguments)]
fn apply_pending(
    py: Python<'_>,
    id: &str,
    project: Option<PathBuf>,
    root: Option<PathBuf>,
    check: bool,
    preimages: Option<PathBuf>,
    conflict_markers: bool,
    strip: usize,
    allow_outside_symlinks: bool,
) -> PyResult<ApplyReport> {
    let opts = options(
        check,
        preimages,
        conflict_markers,
        None,
        strip,
        allow_outside_symlinks,
    );
    py.detach(|| {
        root_of(root).and_then(|r| pending::apply_pending(&r, id, project.as_deref(), &opts))
    })
    .map(ApplyReport::from)
    .map_err(lib_err)
}

/// Removes the pending patch `id` (its meta and pre-images too).
#[pyfunction]
#[pyo3(signature = (id, *, root=None))]
fn drop_pending(py: Python<'_>, id: &str, root: Option<PathBuf>) -> PyResult<()> {
    py.detach(|| root_of(root).and_then(|r| pending::drop_pending(&r, id)))
        .map_err(lib_err)
}

/// Adds the class and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PendingPatch>()?;
    m.add_function(wrap_pyfunction!(list_pending, m)?)?;
    m.add_function(wrap_pyfunction!(read_pending, m)?)?;
    m.add_function(wrap_pyfunction!(apply_pending, m)?)?;
    m.add_function(wrap_pyfunction!(drop_pending, m)?)?;
    Ok(())
}
