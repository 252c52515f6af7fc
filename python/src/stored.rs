//! Pending patches in an object store from Python: `list_stored`, `read_stored`,
//! `apply_stored`, `drop_stored`, `push_pending`, the `StoredPatch` entries and the
//! `PendingDelivery` a `SessionManager(store=…)` returns — the Python face of
//! `patchbox::session::remote`.
//!
//! Why: agents on many machines store their pending work in one bucket (`s3://bucket/prefix`,
//! endpoint and credentials from the AWS variables) or a shared directory; a reviewer
//! anywhere lists, reads, applies or drops it.
//!
//! Invariants: ids are `<session-id>/<name>`, or a name only one stored patch has; a stored
//! patch leaves the store only through `drop_stored` or an `apply_stored` that applied it
//! for real; every call runs with the GIL released.

use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::apply::options;
use crate::convert::root_of;
use crate::errors::lib_err;
use crate::report::ApplyReport;
use patchbox::session::remote::{push, RemoteEntry, RemotePending};
use patchbox::store::StoreUrl;

/// The pending store in the object store `store` (a URL or a directory).
pub(crate) fn open(store: &str) -> patchbox::Result<RemotePending> {
    RemotePending::open(&StoreUrl::parse(store)?)
}

/// One pending patch in an object store.
#[pyclass(name = "StoredPatch", module = "patchbox._native", frozen, get_all)]
pub(crate) struct StoredPatch {
    /// `<session-id>/<name>`, unique in the store.
    id: String,
    /// The session that produced it.
    session: String,
    /// The delegation that produced it.
    delegation: String,
    /// Its name in the session (`<id>`, `<id>.2`, …).
    name: String,
    /// The machine that stored it.
    host: String,
    /// The project it was made from, on that machine.
    project: PathBuf,
    /// When it was stored, seconds since the Unix epoch.
    created: u64,
    /// Recovered from a session that died before finishing.
    recovered: bool,
    /// Its manager ended with the sandbox neither completed nor discarded.
    abandoned: bool,
    /// Files it touches.
    files: u64,
    /// Size of the patch in bytes.
    patch_bytes: u64,
}

impl From<RemoteEntry> for StoredPatch {
    fn from(e: RemoteEntry) -> Self {
        let project = PathBuf::from(std::ffi::OsString::from_vec(e.record.project_bytes()));
        let r = e.record;
        StoredPatch {
            id: e.id,
            session: r.session,
            delegation: r.delegation,
            name: r.name,
            host: r.host,
            project,
            created: r.created,
            recovered: r.recovered,
            abandoned: r.abandoned,
            files: r.files,
            patch_bytes: r.patch_bytes,
        }
    }
}

#[pymethods]
impl StoredPatch {
    fn __repr__(&self) -> String {
        format!(
            "StoredPatch(id={:?}, host={:?}, files={})",
            self.id, self.host, self.files
        )
    }
}

/// Where `SessionManager.deliver_pending_patch` put a pending patch.
#[pyclass(name = "PendingDelivery", module = "patchbox._native", frozen, get_all)]
pub(crate) struct PendingDelivery {
    /// `"local"` (no store configured), `"stored"` (in the object store) or `"kept"` (the
    /// store failed; kept in the local pending store until `push_pending`).
    place: &'static str,
    /// The local patch file (`"local"`, `"kept"`).
    path: Option<PathBuf>,
    /// Its id in the object store (`"stored"`).
    id: Option<String>,
    /// The object store's URL (`"stored"`).
    url: Option<String>,
    /// Why the store failed (`"kept"`).
    error: Option<String>,
}

impl From<patchbox::Delivery> for PendingDelivery {
    fn from(d: patchbox::Delivery) -> Self {
        let mut out = PendingDelivery {
            place: "local",
            path: None,
            id: None,
            url: None,
            error: None,
        };
        match d {
            patchbox::Delivery::Local(p) => out.path = Some(p),
            patchbox::Delivery::Stored { id, url } => {
                out.place = "stored";
                out.id = Some(id);
                out.url = Some(url);
            }
            patchbox::Delivery::Kept { path, error } => {
                out.place = "kept";
                out.path = Some(path);
                out.error = Some(error.to_string());
            }
        }
        out
    }
}

#[pymethods]
impl PendingDelivery {
    fn __repr__(&self) -> String {
        format!(
            "PendingDelivery(place={:?}, id={:?}, path={:?})",
            self.place, self.id, self.path
        )
    }
}

/// Every pending patch in the object store `store`, by session then name.
#[pyfunction]
fn list_stored(py: Python<'_>, store: &str) -> PyResult<Vec<StoredPatch>> {
    let v = py
        .detach(|| open(store).and_then(|s| s.list()))
        .map_err(lib_err)?;
    Ok(v.into_iter().map(StoredPatch::from).collect())
}

/// The bytes of the stored pending patch `id`.
#[pyfunction]
#[pyo3(signature = (id, *, store))]
fn read_stored<'py>(py: Python<'py>, id: &str, store: &str) -> PyResult<Bound<'py, PyBytes>> {
    let b = py
        .detach(|| open(store).and_then(|s| s.read(id)))
        .map_err(lib_err)?;
    Ok(PyBytes::new(py, &b))
}

/// Applies the stored pending patch `id` onto `project` (the caller's own copy), merging
/// 3-way against the pre-images stored with it, with an undo record under `root`. Applied
/// for real (not `check`), it leaves the store; a conflict keeps it.
#[pyfunction]
#[pyo3(signature = (id, project, *, store, root=None, check=false, conflict_markers=false))]
fn apply_stored(
    py: Python<'_>,
    id: &str,
    project: PathBuf,
    store: &str,
    root: Option<PathBuf>,
    check: bool,
    conflict_markers: bool,
) -> PyResult<ApplyReport> {
    let opts = options(check, None, conflict_markers, None, 1, false);
    py.detach(|| {
        let root = root_of(root)?;
        std::fs::create_dir_all(&root).map_err(|e| patchbox::Error::io("create root", &root, e))?;
        open(store).and_then(|s| s.apply(id, &project, &root, &opts))
    })
    .map(ApplyReport::from)
    .map_err(lib_err)
}

/// Removes the stored pending patch `id` (shared pre-images stay for other patches).
#[pyfunction]
#[pyo3(signature = (id, *, store))]
fn drop_stored(py: Python<'_>, id: &str, store: &str) -> PyResult<()> {
    py.detach(|| open(store).and_then(|s| s.drop_pending(id)))
        .map_err(lib_err)
}

/// Sends every local pending patch under `root` to the object store `store` (with its
/// pre-images), removing each locally once stored. Returns `(pushed, failed)`: pairs of
/// (local id, id in the store) and of (local id, error message) for those that stay local.
#[pyfunction]
#[pyo3(signature = (store, *, root=None))]
#[allow(clippy::type_complexity)]
fn push_pending(
    py: Python<'_>,
    store: &str,
    root: Option<PathBuf>,
) -> PyResult<(Vec<(String, String)>, Vec<(String, String)>)> {
    let r = py
        .detach(|| {
            let root = root_of(root)?;
            push::push(&root, &open(store)?, None)
        })
        .map_err(lib_err)?;
    Ok((
        r.pushed,
        r.failed
            .into_iter()
            .map(|(id, e)| (id, e.to_string()))
            .collect(),
    ))
}

/// Adds the classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StoredPatch>()?;
    m.add_class::<PendingDelivery>()?;
    m.add_function(wrap_pyfunction!(list_stored, m)?)?;
    m.add_function(wrap_pyfunction!(read_stored, m)?)?;
    m.add_function(wrap_pyfunction!(apply_stored, m)?)?;
    m.add_function(wrap_pyfunction!(drop_stored, m)?)?;
    m.add_function(wrap_pyfunction!(push_pending, m)?)?;
    Ok(())
}
