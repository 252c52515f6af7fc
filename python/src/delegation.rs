//! What a Python engine holds and gets back for a delegation: `SandboxInfo`,
//! `SandboxResult`, `Completion`, and the enums `Decision` and `Routed` — the Python face of
//! `patchbox::session::delegation`.
//!
//! Why a file of its own: the manager, the completion callback and the stubs all name these,
//! as the Rust layer keeps them apart from its manager.
//!
//! Invariants: every class is frozen (immutable, so shareable between threads without a
//! lock); absolute directories are `pathlib.Path`, paths relative to the project are `str`
//! (as git prints them), the patch is `bytes` (`patch_text` decodes it, replacing what is not
//! UTF-8).

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::rels;
use patchbox::id::DelegationId;
use patchbox::{Decision as RsDecision, Routed as RsRouted, SandboxInfo as RsInfo};

/// A delegation's sandbox: the directory the sub-agent works in.
#[pyclass(name = "SandboxInfo", module = "patchbox._native", frozen, eq)]
#[derive(Clone)]
pub(crate) struct SandboxInfo {
    pub(crate) inner: RsInfo,
}

/// Two handles are equal when they name the same sandbox (path, id, base): a handle rebuilt
/// from those three fields equals the original, whatever its isolation mode.
impl PartialEq for SandboxInfo {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.inner, &other.inner);
        a.path == b.path && a.delegation_id == b.delegation_id && a.base_dir == b.base_dir
    }
}

#[pymethods]
impl SandboxInfo {
    /// Rebuilds a handle (an engine may keep the three fields and come back with them).
    /// The delegation id is checked here, where it comes in: an invalid one raises the
    /// library's invalid-id error.
    #[new]
    fn new(path: PathBuf, delegation_id: &str, base_dir: PathBuf) -> PyResult<Self> {
        let delegation_id =
            DelegationId::parse(delegation_id).map_err(|e| crate::errors::lib_err(e.into()))?;
        Ok(SandboxInfo {
            inner: RsInfo {
                path,
                delegation_id,
                base_dir,
                // Not part of the handle's identity: the manager finds a sandbox by id and path.
                mode: Default::default(),
            },
        })
    }

    /// The sandbox directory `<session>/d-<id>`.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path.clone()
    }

    /// The delegation id.
    #[getter]
    fn delegation_id(&self) -> &str {
        self.inner.delegation_id.as_str()
    }

    /// The session's base snapshot the patch is computed against.
    #[getter]
    fn base_dir(&self) -> PathBuf {
        self.inner.base_dir.clone()
    }

    /// How the sandbox is isolated: `"copy"`, `"kernel-overlay"` or `"fuse-overlay"`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.inner.mode.name()
    }

    fn __repr__(&self) -> String {
        format!(
            "SandboxInfo(path={:?}, delegation_id={:?}, base_dir={:?})",
            self.inner.path, self.inner.delegation_id, self.inner.base_dir
        )
    }
}

/// What a delegation changed.
#[pyclass(name = "SandboxResult", module = "patchbox._native", frozen)]
#[derive(Clone)]
pub(crate) struct SandboxResult {
    pub(crate) inner: patchbox::SandboxResult,
}

#[pymethods]
impl SandboxResult {
    /// The git-style patch, empty when nothing changed.
    #[getter]
    fn patch<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.patch)
    }

    /// The patch as text (U+FFFD where a file's content is not UTF-8).
    #[getter]
    fn patch_text(&self) -> String {
        self.inner.patch_text().into_owned()
    }

    /// Every path the patch touches, relative to the project, sorted.
    #[getter]
    fn files_touched(&self) -> Vec<OsString> {
        rels(&self.inner.files_touched)
    }

    /// Paths the delegation added.
    #[getter]
    fn added(&self) -> Vec<OsString> {
        rels(&self.inner.added)
    }

    /// Paths whose content, mode or type changed.
    #[getter]
    fn modified(&self) -> Vec<OsString> {
        rels(&self.inner.modified)
    }

    /// Paths the delegation deleted.
    #[getter]
    fn deleted(&self) -> Vec<OsString> {
        rels(&self.inner.deleted)
    }

    /// New paths matching the project's ignore rules (not in the patch).
    #[getter]
    fn ignored(&self) -> Vec<OsString> {
        rels(&self.inner.ignored)
    }

    /// The base snapshot directory.
    #[getter]
    fn base_dir(&self) -> PathBuf {
        self.inner.base_dir.clone()
    }

    /// The sandbox directory.
    #[getter]
    fn head_dir(&self) -> PathBuf {
        self.inner.head_dir.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "SandboxResult(files_touched={:?}, patch=<{} bytes>)",
            self.inner.files_touched,
            self.inner.patch.len()
        )
    }
}

/// The consumer's answer when a delegation completes.
#[pyclass(name = "Decision", module = "patchbox._native", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Decision {
    /// The consumer takes the patch (and applies it itself).
    #[pyo3(name = "ACCEPT")]
    Accept,
    /// The patch goes to the pending store.
    #[pyo3(name = "REJECT")]
    Reject,
}

impl From<Decision> for RsDecision {
    fn from(d: Decision) -> Self {
        match d {
            Decision::Accept => RsDecision::Accept,
            Decision::Reject => RsDecision::Reject,
        }
    }
}

/// Where a completed delegation's work went.
#[pyclass(name = "Routed", module = "patchbox._native", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Routed {
    /// Accepted: the patch is in the completion's result.
    #[pyo3(name = "ACCEPTED")]
    Accepted,
    /// Stored in the pending store (`Completion.pending_path`).
    #[pyo3(name = "PENDING")]
    Pending,
    /// The delegation changed nothing; nothing was routed.
    #[pyo3(name = "UNCHANGED")]
    Unchanged,
}

/// The outcome of `SessionManager.complete_sandbox`.
#[pyclass(name = "Completion", module = "patchbox._native", frozen)]
pub(crate) struct Completion {
    result: Py<SandboxResult>,
    routed: Routed,
    pending_path: Option<PathBuf>,
    decide_error: Option<Py<PyAny>>,
}

impl Completion {
    /// Builds the Python completion from the Rust one and the exception the decision
    /// callable raised, if any.
    pub(crate) fn new(
        py: Python<'_>,
        c: patchbox::Completion,
        decide_error: Option<PyErr>,
    ) -> PyResult<Self> {
        let (routed, pending_path) = match c.routed {
            RsRouted::Accepted => (Routed::Accepted, None),
            RsRouted::Pending(p) => (Routed::Pending, Some(p)),
            RsRouted::Unchanged => (Routed::Unchanged, None),
        };
        Ok(Completion {
            result: Py::new(py, SandboxResult { inner: c.result })?,
            routed,
            pending_path,
            decide_error: decide_error.map(|e| e.into_value(py).into_any()),
        })
    }
}

#[pymethods]
impl Completion {
    /// What the delegation changed.
    #[getter]
    fn result(&self, py: Python<'_>) -> Py<SandboxResult> {
        self.result.clone_ref(py)
    }

    /// Where it went.
    #[getter]
    fn routed(&self) -> Routed {
        self.routed
    }

    /// The pending patch file, when `routed` is `Routed.PENDING`.
    #[getter]
    fn pending_path(&self) -> Option<PathBuf> {
        self.pending_path.clone()
    }

    /// The exception the decision callable raised (or the `TypeError` for a return value
    /// that is neither a `Decision` nor a `bool`): the reason the work went pending.
    #[getter]
    fn decide_error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.decide_error.as_ref().map(|e| e.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        let routed = match self.routed {
            Routed::Accepted => "ACCEPTED",
            Routed::Pending => "PENDING",
            Routed::Unchanged => "UNCHANGED",
        };
        format!(
            "Completion(routed=Routed.{routed}, pending_path={:?})",
            self.pending_path
        )
    }
}

/// Adds the classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SandboxInfo>()?;
    m.add_class::<SandboxResult>()?;
    m.add_class::<Decision>()?;
    m.add_class::<Routed>()?;
    m.add_class::<Completion>()?;
    Ok(())
}
