//! The sessions under a root, for an engine that tidies up without a shell: `list_sessions`
//! and `prune_sessions` (the Rust `patchbox::session::recover`), and the `PruneReport` a
//! prune — or a manager's startup recovery — answers with.
//!
//! Why: a crashed engine leaves its session behind; the next one (or a maintenance job)
//! turns its unfinished delegations into pending patches marked recovered.
//!
//! Invariants: a live session (its lock held) is never touched; the work runs with the GIL
//! released; the classes are frozen.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::convert::root_of;
use crate::errors::lib_err;
use patchbox::session::recover;

/// What a prune did.
#[pyclass(name = "PruneReport", module = "patchbox._native", frozen, get_all)]
pub(crate) struct PruneReport {
    /// Dead sessions whose sandboxes were removed.
    pruned: Vec<String>,
    /// Pending patches written from the work of dead sessions.
    recovered: Vec<PathBuf>,
    /// Sessions left alone because they are alive.
    live: Vec<String>,
    /// Problems met; the affected sandboxes were left in place.
    errors: Vec<String>,
    /// Dead sessions left for a later prune (the startup recovery is bounded).
    deferred: Vec<String>,
    /// Shared lower layers removed: superseded ones nobody uses, and ones a dead process was
    /// writing (the newest layer of each project stays).
    shared_layers_removed: usize,
}

impl From<recover::PruneReport> for PruneReport {
    fn from(r: recover::PruneReport) -> Self {
        PruneReport {
            pruned: r.pruned,
            recovered: r.recovered,
            live: r.live,
            errors: r.errors,
            deferred: r.deferred,
            shared_layers_removed: r.shared_layers_removed,
        }
    }
}

#[pymethods]
impl PruneReport {
    fn __repr__(&self) -> String {
        format!(
            "PruneReport(pruned={:?}, recovered={:?}, live={:?}, errors={:?}, deferred={:?}, \
             shared_layers_removed={})",
            self.pruned,
            self.recovered,
            self.live,
            self.errors,
            self.deferred,
            self.shared_layers_removed
        )
    }
}

/// A session found under a root.
#[pyclass(name = "SessionStatus", module = "patchbox._native", frozen, get_all)]
pub(crate) struct SessionStatus {
    /// The session id.
    id: String,
    /// Whether its owner still holds its lock.
    live: bool,
    /// The project it snapshots, if known.
    project: Option<PathBuf>,
    /// Its sandboxes (`d-*` names).
    sandboxes: Vec<String>,
    /// How many pending patches it holds.
    pending: usize,
}

#[pymethods]
impl SessionStatus {
    fn __repr__(&self) -> String {
        format!(
            "SessionStatus(id={:?}, live={}, project={:?}, sandboxes={:?}, pending={})",
            self.id, self.live, self.project, self.sandboxes, self.pending
        )
    }
}

/// The sessions under `root`, oldest first, and whether each is alive.
#[pyfunction]
#[pyo3(signature = (root=None))]
fn list_sessions(py: Python<'_>, root: Option<PathBuf>) -> PyResult<Vec<SessionStatus>> {
    let list = py
        .detach(|| root_of(root).and_then(|r| recover::list_sessions(&r)))
        .map_err(lib_err)?;
    Ok(list
        .into_iter()
        .map(|s| SessionStatus {
            id: s.id,
            live: s.live,
            project: s.project,
            sandboxes: s.sandboxes,
            pending: s.pending,
        })
        .collect())
}

/// Recovers every dead session under `root` into pending patches and removes its
/// sandboxes; live sessions are left alone.
#[pyfunction]
#[pyo3(signature = (root=None))]
fn prune_sessions(py: Python<'_>, root: Option<PathBuf>) -> PyResult<PruneReport> {
    py.detach(|| root_of(root).and_then(|r| recover::prune(&r)))
        .map(PruneReport::from)
        .map_err(lib_err)
}

/// Adds the classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PruneReport>()?;
    m.add_class::<SessionStatus>()?;
    m.add_function(wrap_pyfunction!(list_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(prune_sessions, m)?)?;
    Ok(())
}
