//! `BuiltInSandboxStrategyAdapter`: a built-in strategy behind the nine-method strategy
//! protocol (the Rust `BuiltInAdapter`), so code written against the protocol drives
//! `copy_on_write`, `overlay`, `git_worktree` or `none` as it drives a custom strategy.
//!
//! Why: the docs' adapter example (`adapter.create("plan-001", resource)`, `write`, `read`,
//! `cleanup`). Invariants: the adapter's sandboxes live in a manager of their own under
//! `root` (default: `<default root>/adapter`); operations release the GIL; a failure is
//! the step's exception class (create → `SandboxCreationError`, commit →
//! `SandboxCommitError`, rollback → `SandboxRollbackError`, else `SandboxError`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use pyo3::prelude::*;

use patchbox::plan::custom::{
    BuiltInAdapter, SandboxRef as RsRef, StrategyFailure, StrategyProtocol,
};

use crate::boundary::Resource;
use crate::errors::{
    plan_err, SandboxCommitError, SandboxCreationError, SandboxError_, SandboxRollbackError,
};
use crate::plan::default_root;
use crate::plan_model::{ref_of, ref_record, DiffEntry, DiffView};

/// A built-in strategy through the strategy protocol.
#[pyclass(frozen, module = "patchbox._native")]
pub struct BuiltInSandboxStrategyAdapter {
    inner: BuiltInAdapter,
}

fn rs_ref(r: &Bound<'_, PyAny>) -> PyResult<RsRef> {
    ref_of(r)
}

fn failed(op: &str, f: StrategyFailure) -> PyErr {
    let msg = format!("{op}: {f}");
    match op {
        "create" => SandboxCreationError::new_err(msg),
        "commit" => SandboxCommitError::new_err(msg),
        "rollback" => SandboxRollbackError::new_err(msg),
        _ => SandboxError_::new_err(msg),
    }
}

#[pymethods]
impl BuiltInSandboxStrategyAdapter {
    #[new]
    #[pyo3(signature = (strategy_name, root=None))]
    fn py_new(
        py: Python<'_>,
        strategy_name: &str,
        root: Option<PathBuf>,
    ) -> PyResult<BuiltInSandboxStrategyAdapter> {
        let strategy = patchbox::plan::Strategy::from_name(strategy_name).map_err(plan_err)?;
        let root = match root {
            Some(r) => r,
            None => default_root()?.join("adapter"),
        };
        let inner = py
            .detach(|| BuiltInAdapter::new(&root, strategy))
            .map_err(plan_err)?;
        Ok(BuiltInSandboxStrategyAdapter { inner })
    }

    /// The adapted strategy's name.
    #[getter]
    fn strategy_name(&self) -> String {
        self.inner.strategy().name().to_string()
    }

    /// Makes a sandbox of `resource` for `plan_id`; returns its reference (a `SandboxRef`).
    fn create<'py>(
        &self,
        py: Python<'py>,
        plan_id: String,
        resource: &Resource,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut r = RsRef {
            sandbox_id: format!("adapter-{}", ulid_now()),
            plan_id,
            resource_id: resource.inner.id.clone(),
            created_at: SystemTime::now(),
            metadata: BTreeMap::new(),
        };
        let original = resource.inner.path.clone();
        let meta = py
            .detach(|| self.inner.create(&r, &original))
            .map_err(|f| failed("create", f))?;
        r.metadata = meta;
        r.metadata.insert(
            "original_path".into(),
            original.to_string_lossy().into_owned(),
        );
        ref_record(py, &r)
    }

    fn read(
        &self,
        py: Python<'_>,
        r: &Bound<'_, PyAny>,
        path: String,
    ) -> PyResult<Option<Vec<u8>>> {
        let r = rs_ref(r)?;
        py.detach(|| self.inner.read(&r, &path))
            .map_err(|f| failed("read", f))
    }

    /// Sets the content of `path` in the sandbox; returns the change as a `DiffEntry`
    /// (`added` or `modified`, with the content before and after).
    fn write(
        &self,
        py: Python<'_>,
        r: &Bound<'_, PyAny>,
        path: String,
        content: Vec<u8>,
    ) -> PyResult<DiffEntry> {
        let r = rs_ref(r)?;
        let before = py
            .detach(|| {
                let before = self.inner.read(&r, &path)?;
                self.inner.write(&r, &path, &content)?;
                Ok(before)
            })
            .map_err(|f| failed("write", f))?;
        let operation = if before.is_some() {
            "modified"
        } else {
            "added"
        };
        Ok(DiffEntry {
            path,
            operation: operation.to_string(),
            before,
            after: Some(content),
            before_mode: None,
            after_mode: None,
        })
    }

    fn diff(&self, py: Python<'_>, r: &Bound<'_, PyAny>) -> PyResult<DiffView> {
        let r = rs_ref(r)?;
        let v = py
            .detach(|| self.inner.diff(&r))
            .map_err(|f| failed("diff", f))?;
        DiffView::from_rs(py, v)
    }

    /// Commits; returns what names the commit, if anything does.
    #[pyo3(signature = (r, message=None))]
    fn commit(
        &self,
        py: Python<'_>,
        r: &Bound<'_, PyAny>,
        message: Option<String>,
    ) -> PyResult<Option<String>> {
        let r = rs_ref(r)?;
        py.detach(|| self.inner.commit(&r, message.as_deref()))
            .map_err(|f| failed("commit", f))
    }

    #[pyo3(signature = (r, after_commit=false))]
    fn rollback(&self, py: Python<'_>, r: &Bound<'_, PyAny>, after_commit: bool) -> PyResult<()> {
        let r = rs_ref(r)?;
        py.detach(|| self.inner.rollback(&r, after_commit))
            .map_err(|f| failed("rollback", f))
    }

    fn checkpoint(
        &self,
        py: Python<'_>,
        r: &Bound<'_, PyAny>,
        checkpoint_id: String,
    ) -> PyResult<()> {
        let r = rs_ref(r)?;
        py.detach(|| self.inner.checkpoint(&r, &checkpoint_id))
            .map_err(|f| failed("checkpoint", f))
    }

    fn restore_checkpoint(
        &self,
        py: Python<'_>,
        r: &Bound<'_, PyAny>,
        checkpoint_id: String,
    ) -> PyResult<()> {
        let r = rs_ref(r)?;
        py.detach(|| self.inner.restore_checkpoint(&r, &checkpoint_id))
            .map_err(|f| failed("restore_checkpoint", f))
    }

    fn cleanup(&self, py: Python<'_>, r: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = rs_ref(r)?;
        py.detach(|| self.inner.cleanup(&r))
            .map_err(|f| failed("cleanup", f))
    }

    fn is_rollbackable(&self) -> bool {
        self.inner.is_rollbackable()
    }
}

/// A fresh ULID (unique, time-sortable).
fn ulid_now() -> String {
    ulid::Ulid::new().to_string()
}
