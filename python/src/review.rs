//! Review and accept from Python: the pending store's JSON records (the documents
//! `patchbox … --json` prints, see `docs/json.md`) and `apply_pending_selected`, accepting
//! part of a pending patch — the Python face of `patchbox::records` and
//! `patchbox::session::pending_select`.
//!
//! Invariants: the JSON text is exactly what the CLI and the C++ API produce (one serializer,
//! `patchbox::records::to_json`); a selection that cannot be made raises `PatchboxError`
//! (kind `"pending"`) and writes nothing; the work runs with the GIL released.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::apply::options;
use crate::convert::root_of;
use crate::errors::lib_err;
use crate::report::ApplyReport;
use patchbox::patch::select::{HunkPick, Selection};
use patchbox::records;
use patchbox::session::{pending, pending_select, recover};

/// Every pending patch's record under `root`, as the JSON array `pending list --json` prints.
#[pyfunction]
#[pyo3(signature = (root=None))]
fn pending_records_json(py: Python<'_>, root: Option<PathBuf>) -> PyResult<String> {
    py.detach(|| root_of(root).and_then(|r| records::pending_records(&r)))
        .map(|v| records::to_json(&v))
        .map_err(lib_err)
}

/// One pending patch's record, its patch text included, as `pending show --json` prints it.
#[pyfunction]
#[pyo3(signature = (id, *, root=None))]
fn pending_record_json(py: Python<'_>, id: &str, root: Option<PathBuf>) -> PyResult<String> {
    py.detach(|| {
        root_of(root).and_then(|r| records::PendingRecord::of(&pending::find(&r, id)?, true))
    })
    .map(|v| records::to_json(&v))
    .map_err(lib_err)
}

/// One pending patch's record in the object store `store`, its patch text included, as
/// `pending show --json --store URL` prints it.
#[pyfunction]
#[pyo3(signature = (id, *, store))]
fn stored_record_json(py: Python<'_>, id: &str, store: &str) -> PyResult<String> {
    py.detach(|| {
        let s = crate::stored::open(store)?;
        let e = s.find(id)?;
        let patch = s.patch_of(&e)?;
        Ok(records::PendingRecord::of_stored(store, &e, &patch, true))
    })
    .map(|v: records::PendingRecord| records::to_json(&v))
    .map_err(lib_err)
}

/// The sessions under `root` as the JSON array `sessions --json` prints.
#[pyfunction]
#[pyo3(signature = (root=None))]
fn sessions_json(py: Python<'_>, root: Option<PathBuf>) -> PyResult<String> {
    py.detach(|| root_of(root).and_then(|r| recover::list_sessions(&r)))
        .map(|v| {
            let recs: Vec<records::SessionRecord> = v.iter().map(Into::into).collect();
            records::to_json(&recs)
        })
        .map_err(lib_err)
}

/// What `apply_pending_selected` did.
#[pyclass(name = "PartialApply", module = "patchbox._native", frozen)]
pub(crate) struct PartialApply {
    report: Py<ApplyReport>,
    remaining: Option<String>,
    json: String,
}

#[pymethods]
impl PartialApply {
    /// The apply of the chosen part.
    #[getter]
    fn report(&self, py: Python<'_>) -> Py<ApplyReport> {
        self.report.clone_ref(py)
    }

    /// The new pending patch holding the rest; `None` when nothing is left or nothing was
    /// applied.
    #[getter]
    fn remaining(&self) -> Option<String> {
        self.remaining.clone()
    }

    /// The report as JSON, with `pending_id` and `remaining` (what `pending apply --json`
    /// prints).
    fn to_json(&self) -> String {
        self.json.clone()
    }

    fn __repr__(&self) -> String {
        format!("PartialApply(remaining={:?})", self.remaining)
    }
}

/// Applies the part of pending patch `id` that `only`, `exclude` and `hunks` choose (as
/// `patchbox pending apply --only/--exclude/--hunks`), keeping the rest pending.
#[pyfunction]
#[pyo3(signature = (id, project=None, *, root=None, only=Vec::new(), exclude=Vec::new(), hunks=Vec::new(), check=false, conflict_markers=false))]
#[allow(clippy::too_many_arguments)]
fn apply_pending_selected(
    py: Python<'_>,
    id: &str,
    project: Option<PathBuf>,
    root: Option<PathBuf>,
    only: Vec<String>,
    exclude: Vec<String>,
    hunks: Vec<String>,
    check: bool,
    conflict_markers: bool,
) -> PyResult<PartialApply> {
    let opts = options(check, None, conflict_markers, None, 1, false);
    let (r, json) = py
        .detach(|| {
            let hunks = hunks
                .iter()
                .map(|h| HunkPick::parse(h))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| patchbox::Error::Pending {
                    id: id.to_string(),
                    reason: e.to_string(),
                })?;
            let sel = Selection {
                only,
                exclude,
                hunks,
            };
            let root = root_of(root)?;
            let full_id = pending::find(&root, id)?.id;
            let r =
                pending_select::apply_pending_selected(&root, id, project.as_deref(), &sel, &opts)?;
            let mut rec = records::ApplyRecord::from(&r.report);
            rec.pending_id = Some(full_id);
            if !sel.is_everything() {
                rec.remaining = Some(r.remaining.clone());
            }
            Ok::<_, patchbox::Error>((r, records::to_json(&rec)))
        })
        .map_err(lib_err)?;
    Ok(PartialApply {
        report: Py::new(py, ApplyReport::from(r.report))?,
        remaining: r.remaining,
        json,
    })
}

/// Adds the class and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PartialApply>()?;
    m.add_function(wrap_pyfunction!(pending_records_json, m)?)?;
    m.add_function(wrap_pyfunction!(pending_record_json, m)?)?;
    m.add_function(wrap_pyfunction!(stored_record_json, m)?)?;
    m.add_function(wrap_pyfunction!(sessions_json, m)?)?;
    m.add_function(wrap_pyfunction!(apply_pending_selected, m)?)?;
    Ok(())
}
