//! `Sandbox`: one resource's plan sandbox (the Rust `Arc<dyn Sandbox>`), the base class of
//! the strategy classes (`strategies.rs`) that `SandboxManager` (`plan.rs`) hands out.
//!
//! Its own file, below both the strategy classes and the manager. Invariants as in
//! `plan.rs`: every call that touches the disk releases the GIL; `with sandbox:` cleans the
//! sandbox up on exit unless it holds uncommitted changes; errors are the classes of
//! `errors.rs`.

use std::path::Path;
use std::sync::Arc;

use pyo3::prelude::*;

use patchbox::id::PlanId;
use patchbox::plan::{PlanManager, Sandbox as RsSandbox, Status};

use crate::errors::plan_err;
use crate::plan_model::{commit_record, context_record, path_str, SandboxDiff, SandboxStatus};

/// One resource's sandbox in one plan: the base of the strategy classes (see
/// `strategies.rs`); every sandbox the manager hands out is of its strategy's class.
#[pyclass(frozen, subclass, module = "patchbox._native")]
pub struct Sandbox {
    pub(crate) inner: Arc<dyn RsSandbox>,
    /// Its manager, kept alive while the sandbox is used (a manager collected early would
    /// clean up the sandboxes holding no work); `None` for none.
    _owner: Option<Arc<PlanManager>>,
}

impl Sandbox {
    /// The base of a sandbox object (`strategies::new_object` adds the strategy's class).
    pub(crate) fn new(inner: Arc<dyn RsSandbox>, owner: Option<Arc<PlanManager>>) -> Sandbox {
        Sandbox {
            inner,
            _owner: owner,
        }
    }
}

#[pymethods]
impl Sandbox {
    /// Its ULID.
    #[getter]
    fn sandbox_id(&self) -> &str {
        self.inner.sandbox_id()
    }

    /// Its strategy's name.
    #[getter]
    fn strategy(&self) -> String {
        self.inner.strategy().name().to_string()
    }

    #[getter]
    fn status(&self, py: Python<'_>) -> SandboxStatus {
        // Detached: an operation of a Python strategy holds the sandbox's lock while it
        // waits for the GIL.
        SandboxStatus::py(py.detach(|| self.inner.status()))
    }

    /// `None` before `create`.
    #[getter]
    fn context(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        py.detach(|| self.inner.context())
            .map(|c| context_record(py, c))
            .transpose()
    }

    /// Whether a commit of it can be undone.
    #[getter]
    fn is_rollbackable(&self, py: Python<'_>) -> bool {
        py.detach(|| self.inner.is_rollbackable())
    }

    /// Makes the sandbox environment (pending → created); the manager's
    /// `get_or_create_sandbox` has already done it for the sandboxes it returns.
    fn create(&self, py: Python<'_>, plan_id: &str) -> PyResult<Py<PyAny>> {
        // Parsed here, at the boundary, with the plan layer's message for a bad id.
        let plan_id = PlanId::parse(plan_id).map_err(|e| plan_err(e.into()))?;
        let sb = self.inner.clone();
        let ctx = py.detach(|| sb.create(&plan_id)).map_err(plan_err)?;
        context_record(py, ctx)
    }

    /// The absolute path of `resource_path` (resource-relative) in the sandbox; makes a
    /// created sandbox active. Absolute paths, `..` and symlinks out of the sandbox raise.
    #[pyo3(signature = (resource_path=String::new()))]
    fn get_path(&self, py: Python<'_>, resource_path: String) -> PyResult<String> {
        let sb = self.inner.clone();
        let p = py
            .detach(|| sb.get_path(Path::new(&resource_path)))
            .map_err(plan_err)?;
        Ok(path_str(&p))
    }

    /// The content of `resource_path` in the sandbox; `None` when it does not exist there.
    fn read(&self, py: Python<'_>, resource_path: String) -> PyResult<Option<Vec<u8>>> {
        let sb = self.inner.clone();
        py.detach(|| sb.read(Path::new(&resource_path)))
            .map_err(plan_err)
    }

    /// Sets the content of `resource_path` in the sandbox (parents made as needed).
    fn write(&self, py: Python<'_>, resource_path: String, content: Vec<u8>) -> PyResult<()> {
        let sb = self.inner.clone();
        py.detach(|| sb.write(Path::new(&resource_path), &content))
            .map_err(plan_err)
    }

    /// The changes against what the sandbox was made from.
    fn diff(&self, py: Python<'_>) -> PyResult<SandboxDiff> {
        let sb = self.inner.clone();
        let d = py.detach(|| sb.diff()).map_err(plan_err)?;
        SandboxDiff::new(py, d)
    }

    /// Checks, writing nothing, that `commit` would succeed now (raises
    /// `SandboxCommitError` naming the conflicting files).
    fn check_commit(&self, py: Python<'_>) -> PyResult<()> {
        let sb = self.inner.clone();
        py.detach(|| sb.check_commit()).map_err(plan_err)
    }

    /// Brings the sandbox's changes into the original (active → committed).
    #[pyo3(signature = (message=None))]
    fn commit(&self, py: Python<'_>, message: Option<String>) -> PyResult<Py<PyAny>> {
        let sb = self.inner.clone();
        let r = py
            .detach(|| sb.commit(message.as_deref()))
            .map_err(plan_err)?;
        commit_record(py, r)
    }

    /// Active: discards the changes. Committed: undoes the commit in the original (refused,
    /// naming the files, when the user changed them since).
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        let sb = self.inner.clone();
        py.detach(|| sb.rollback()).map_err(plan_err)
    }

    /// Removes every artefact (an active sandbox's changes are discarded). Idempotent.
    fn cleanup(&self, py: Python<'_>) -> PyResult<()> {
        let sb = self.inner.clone();
        py.detach(|| sb.cleanup()).map_err(plan_err)
    }

    /// `transaction_rollback` only: runs one SQL statement (`?1`, `?2`… parameters: None,
    /// int, float, str, bytes) inside the sandbox's transaction; returns its rows as tuples.
    #[pyo3(signature = (sql, params=Vec::new()))]
    fn execute(
        &self,
        py: Python<'_>,
        sql: String,
        params: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        crate::sql::execute(py, &self.inner, &sql, params)
    }

    /// `transaction_rollback` only: `SAVEPOINT name`.
    fn savepoint(&self, py: Python<'_>, name: String) -> PyResult<()> {
        crate::sql::savepoint(py, &self.inner, "savepoint", &name)
    }

    /// `transaction_rollback` only: `ROLLBACK TO name`.
    fn rollback_to_savepoint(&self, py: Python<'_>, name: String) -> PyResult<()> {
        crate::sql::savepoint(py, &self.inner, "rollback_to", &name)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Cleans the sandbox up unless it holds uncommitted changes (kept, never lost);
    /// exceptions propagate.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let sb = self.inner.clone();
        py.detach(|| {
            let keep = match sb.status() {
                Status::Active => sb.diff().map(|d| !d.entries.is_empty()).unwrap_or(true),
                Status::CleanedUp => true,
                _ => false,
            };
            if keep {
                Ok(())
            } else {
                sb.cleanup()
            }
        })
        .map_err(plan_err)?;
        Ok(false)
    }

    /// `CopyOnWriteSandbox(sandbox_id=..., strategy=..., status=...)`: the strategy's class.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let me = slf.get();
        let class = slf.get_type().name()?.to_string();
        Ok(format!(
            "{class}(sandbox_id={:?}, strategy={:?}, status={:?})",
            me.inner.sandbox_id(),
            me.inner.strategy().name(),
            slf.py().detach(|| me.inner.status()).name()
        ))
    }
}
