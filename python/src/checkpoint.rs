//! `CheckpointManager` and `SandboxCheckpoint`: checkpoints of plan sandboxes at the phases
//! (`pre_execute`, `post_execute`, `pre_apply`) and rollback to them.
//!
//! Why: a failed Execute or Apply phase goes back to the sandbox's state before it. A
//! checkpoint records the sandbox's changes against its base, deduplicated, so it costs what
//! changed, not a copy. Invariants: `Send + Sync` (the Rust manager locks per sandbox); the
//! GIL is released while a checkpoint is taken or restored; checkpoints made by a manager are
//! removed when it is closed or collected, unless `keep()` was called; a `SandboxCheckpoint`
//! is a frozen record that keeps what `rollback_to` needs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::RwLock;
use pyo3::prelude::*;

use patchbox::plan::checkpoint::{Checkpoint, CheckpointManager as RsCheckpoints};
use patchbox::plan::SandboxError;

use crate::errors::plan_err;
use crate::plan::{default_root, Sandbox, SandboxManager};
use crate::plan_model::{datetime, path_str};

/// A point-in-time state of a sandbox.
#[pyclass(frozen, module = "patchbox._native")]
pub struct SandboxCheckpoint {
    inner: Checkpoint,
}

#[pymethods]
impl SandboxCheckpoint {
    #[getter]
    fn checkpoint_id(&self) -> &str {
        &self.inner.checkpoint_id
    }
    #[getter]
    fn sandbox_id(&self) -> &str {
        &self.inner.sandbox_id
    }
    #[getter]
    fn plan_id(&self) -> &str {
        &self.inner.plan_id
    }
    /// `pre_execute`, `post_execute`, `pre_apply`, or the caller's name.
    #[getter]
    fn phase(&self) -> &str {
        &self.inner.phase
    }
    #[getter]
    fn created_at(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        datetime(py, self.inner.created_at)
    }
    #[getter]
    fn metadata(&self) -> BTreeMap<String, String> {
        self.inner.metadata.clone()
    }
    /// The checkpoint's manifest (what it records, and where its content is).
    #[getter]
    fn snapshot_path(&self) -> String {
        path_str(&self.inner.snapshot_path)
    }
    fn __repr__(&self) -> String {
        format!(
            "SandboxCheckpoint(checkpoint_id={:?}, sandbox_id={:?}, phase={:?})",
            self.inner.checkpoint_id, self.inner.sandbox_id, self.inner.phase
        )
    }
}

/// Checkpoints of the sandboxes under one root.
#[pyclass(frozen, module = "patchbox._native")]
pub struct CheckpointManager {
    inner: RwLock<Option<RsCheckpoints>>,
}

impl CheckpointManager {
    fn with<T>(&self, f: impl FnOnce(&RsCheckpoints) -> Result<T, SandboxError>) -> PyResult<T> {
        let g = self.inner.read();
        let m = g.as_ref().ok_or_else(|| {
            plan_err(SandboxError::sandbox(
                None,
                "the CheckpointManager is closed",
            ))
        })?;
        f(m).map_err(plan_err)
    }
}

impl CheckpointManager {
    /// Runs `f` with the Rust manager (`None` once closed), holding it open meanwhile.
    pub(crate) fn with_inner<T>(&self, f: impl FnOnce(Option<&RsCheckpoints>) -> T) -> T {
        let g = self.inner.read();
        f(g.as_ref())
    }
}

fn wrap(cps: Vec<Checkpoint>) -> Vec<SandboxCheckpoint> {
    cps.into_iter()
        .map(|inner| SandboxCheckpoint { inner })
        .collect()
}

#[pymethods]
impl CheckpointManager {
    /// The checkpoints of the sandboxes under `root`: a `SandboxManager` (its root), a
    /// directory, or the default root (`$PATCHBOX_ROOT`, else `$HOME/.entropic/sandbox`).
    /// `store` (`s3://bucket/prefix`, or a directory): file checkpoints are written there too,
    /// for `restore_from_store` on another machine.
    #[new]
    #[pyo3(signature = (root=None, *, store=None))]
    fn py_new(
        root: Option<&Bound<'_, PyAny>>,
        store: Option<String>,
    ) -> PyResult<CheckpointManager> {
        let root: PathBuf = match root {
            None => default_root()?,
            Some(r) => match r.cast::<SandboxManager>() {
                Ok(m) => PathBuf::from(m.get().root_path()?),
                Err(_) => r.extract()?,
            },
        };
        let inner = match store {
            None => RsCheckpoints::new(root),
            Some(url) => {
                let url = patchbox::store::StoreUrl::parse(&url)
                    .map_err(|e| crate::errors::lib_err(patchbox::Error::from(e)))?;
                RsCheckpoints::with_store(root, &url).map_err(plan_err)?
            }
        };
        Ok(CheckpointManager {
            inner: RwLock::new(Some(inner)),
        })
    }

    /// The checkpoints in the manager's object store, of every plan and sandbox, oldest
    /// first. Raises `SandboxError` without a store.
    fn list_stored(&self, py: Python<'_>) -> PyResult<Vec<SandboxCheckpoint>> {
        py.detach(|| self.with(|m| m.list_stored())).map(wrap)
    }

    /// Makes `sandbox` what the stored checkpoint `checkpoint_id` recorded (a sandbox of a
    /// copy of the same project state, on any machine); returns the checkpoint, now kept
    /// locally too, or `None` when the store has no such checkpoint.
    fn restore_from_store(
        &self,
        py: Python<'_>,
        sandbox: &Sandbox,
        checkpoint_id: String,
    ) -> PyResult<Option<SandboxCheckpoint>> {
        let sb = sandbox.inner.clone();
        py.detach(|| self.with(|m| m.restore_from_store(&sb, &checkpoint_id)))
            .map(|c| c.map(|inner| SandboxCheckpoint { inner }))
    }

    /// Removes the store's objects no stored checkpoint refers to and older than
    /// `grace_seconds`; returns how many went.
    #[pyo3(signature = (grace_seconds=3600.0))]
    fn prune_store(&self, py: Python<'_>, grace_seconds: f64) -> PyResult<usize> {
        let grace = std::time::Duration::from_secs_f64(grace_seconds.max(0.0));
        py.detach(|| self.with(|m| m.prune_store(grace)))
    }

    /// Records the state of `sandbox` now, at `phase`, with `metadata`.
    #[pyo3(signature = (sandbox, plan_id, phase, metadata=None))]
    fn create_checkpoint(
        &self,
        py: Python<'_>,
        sandbox: &Sandbox,
        plan_id: String,
        phase: String,
        metadata: Option<BTreeMap<String, String>>,
    ) -> PyResult<SandboxCheckpoint> {
        let sb = sandbox.inner.clone();
        let meta = metadata.unwrap_or_default();
        py.detach(|| self.with(|m| m.create_checkpoint(&sb, &plan_id, &phase, meta)))
            .map(|inner| SandboxCheckpoint { inner })
    }

    /// Makes the checkpoint's sandbox exactly what it was then; `False` when the checkpoint
    /// no longer exists (deleted, or its sandbox cleaned up).
    ///
    /// Only for a sandbox whose work is not committed: on a committed sandbox, of any
    /// strategy, it raises `SandboxStateError` (`from_status` "committed") and changes
    /// nothing. Undo the commit first (`sandbox.rollback()`), then roll back to the checkpoint.
    fn rollback_to(&self, py: Python<'_>, checkpoint: &SandboxCheckpoint) -> PyResult<bool> {
        let cp = checkpoint.inner.clone();
        py.detach(|| self.with(|m| m.rollback_to(&cp)))
    }

    /// The checkpoints of a sandbox this manager knows, oldest first.
    fn list_checkpoints(
        &self,
        py: Python<'_>,
        sandbox_id: String,
    ) -> PyResult<Vec<SandboxCheckpoint>> {
        py.detach(|| self.with(|m| m.list_checkpoints(&sandbox_id)))
            .map(wrap)
    }

    /// Removes a checkpoint; `False` when it was not there.
    fn delete_checkpoint(&self, py: Python<'_>, checkpoint_id: String) -> PyResult<bool> {
        py.detach(|| self.with(|m| m.delete_checkpoint(&checkpoint_id)))
    }

    /// Makes the manager know `sandbox` (its checkpoints on disk then list).
    fn attach(&self, py: Python<'_>, sandbox: &Sandbox) -> PyResult<()> {
        let sb = sandbox.inner.clone();
        py.detach(|| self.with(|m| m.attach(&sb)))
    }

    /// Keeps the checkpoints on disk when the manager is closed.
    fn keep(&self) -> PyResult<()> {
        self.with(|m| {
            m.keep();
            Ok(())
        })
    }

    /// Bytes the checkpoints of a sandbox take on disk.
    fn disk_bytes(&self, sandbox_id: &str) -> PyResult<u64> {
        self.with(|m| Ok(m.disk_bytes(sandbox_id)))
    }

    /// Closes the manager: the checkpoints it made are removed unless `keep()` was called.
    fn close(&self, py: Python<'_>) {
        // Detached: a phase running Python code may hold the manager open.
        let m = py.detach(|| self.inner.write().take());
        if let Some(m) = m {
            py.detach(move || drop(m));
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }
}
