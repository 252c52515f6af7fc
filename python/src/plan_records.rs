//! A plan commit's result as the JSON record `patchbox plan commit --json` prints one of
//! (see `docs/json.md`): the Python face of serializing a `patchbox::plan::CommitResult`.
//!
//! Why here: the `CommitResult` dataclass is plain Python (a custom strategy builds its own),
//! so the record is made by turning it back into the Rust result and serializing that with
//! `patchbox::records::to_json`, the one serializer the CLI and the C++ API use. Invariant:
//! for a result the library returned, the record equals the CLI's element for that commit
//! (`rolled_back_ids`, a list in Python, is comma-separated again; the timestamp is
//! milliseconds).

use std::collections::BTreeMap;
use std::time::SystemTime;

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::plan_model::meta_of;
use patchbox::plan::CommitResult as RsCommitResult;

/// The record of `result` (a `CommitResult`, or any object with its attributes) as JSON
/// text; `CommitResult.to_record()` parses it.
#[pyfunction]
fn commit_record_json(result: &Bound<'_, PyAny>) -> PyResult<String> {
    let r = RsCommitResult {
        sandbox_id: result.getattr("sandbox_id")?.extract()?,
        success: result.getattr("success")?.extract()?,
        commit_ref: result.getattr("commit_ref")?.extract()?,
        changed_files: result.getattr("changed_files")?.extract()?,
        added_files: result.getattr("added_files")?.extract()?,
        deleted_files: result.getattr("deleted_files")?.extract()?,
        error: result.getattr("error")?.extract()?,
        timestamp: result.getattr("timestamp")?.extract::<SystemTime>()?,
        metadata: metadata_of(&result.getattr("metadata")?)?,
    };
    Ok(patchbox::records::to_json(&r))
}

/// The metadata as the Rust result keeps it: a list of ids (`rolled_back_ids` of a failed
/// result) comma-separated as the library writes it, everything else as [`meta_of`] keeps
/// a custom strategy's metadata.
fn metadata_of(m: &Bound<'_, PyAny>) -> PyResult<BTreeMap<String, String>> {
    let py = m.py();
    let copy = pyo3::types::PyDict::new(py);
    for item in m.call_method0("items")?.try_iter()? {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
        match v.extract::<Vec<String>>() {
            Ok(ids) if !v.is_instance_of::<PyString>() => copy.set_item(k, ids.join(","))?,
            _ => copy.set_item(k, v)?,
        }
    }
    meta_of(copy.as_any())
}

/// Registers the function.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(commit_record_json, m)?)
}
