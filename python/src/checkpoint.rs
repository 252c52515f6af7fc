//! `CheckpointManager` and `SandboxCheckpoint`: checkpoints of plan sandboxes at the phases
//! (`pre_execute`, `post_execute`, `pre_apply`) and rollback to them.
//!
//! Why: a failed Execute or Apply phase goes back to the sandbox's state before it. A
//! checkpoint records the sandbox's changes against its base, deduplicated, so it costs what
//! changed, not a copy. Invariants: `Send + Sync` (the Rust manager locks per sandbox); the
//! GIL is released while a checkpoint is taken or restored; checkpoints made by a manager are
//! removed when it is closed or collected, unless `keep()` was called; a `SandboxCheckpoint`
//! is the frozen record of `patchbox._records` (what `rollback_to` needs is its ids).

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use patchbox::plan::checkpoint::{Checkpoint, CheckpointManager as RsCheckpoints};
use patchbox::plan::SandboxError;

use crate::errors::plan_err;
use crate::plan::SandboxManager;
use crate::plan_model::{datetime, default_root, path_str, record};
use crate::sandbox::Sandbox;

/// A Rust checkpoint as the `SandboxCheckpoint` record (`patchbox._records`).
fn checkpoint_record(py: Python<'_>, c: Checkpoint) -> PyResult<Py<PyAny>> {
    let kw = PyDict::new(py);
    kw.set_item("checkpoint_id", c.checkpoint_id)?;
    kw.set_item("sandbox_id", c.sandbox_id)?;
    kw.set_item("plan_id", c.plan_id)?;
    kw.set_item("phase", c.phase)?;
    kw.set_item("created_at", datetime(py, c.created_at)?)?;
    kw.set_item("metadata", c.metadata)?;
    kw.set_item("snapshot_path", path_str(&c.snapshot_path))?;
    record(py, "SandboxCheckpoint", &kw)
}

/// A `SandboxCheckpoint` (or any object with its attributes) as the Rust checkpoint:
/// `rollback_to` needs its `checkpoint_id` and `sandbox_id` only.
fn checkpoint_of(c: &Bound<'_, PyAny>) -> PyResult<Checkpoint> {
    let text = |name: &str| -> PyResult<String> { c.getattr(name)?.extract() };
    Ok(Checkpoint {
        checkpoint_id: text("checkpoint_id")?,
        sandbox_id: text("sandbox_id")?,
        plan_id: text("plan_id").unwrap_or_default(),
        phase: text("phase").unwrap_or_default(),
        created_at: std::time::SystemTime::now(),
        metadata: BTreeMap::new(),
        snapshot_path: PathBuf::from(text("snapshot_path").unwrap_or_default()),
    })
}

fn wrap(py: Python<'_>, cps: Vec<Checkpoint>) -> PyResult<Vec<Py<PyAny>>> {
    cps.into_iter().map(|c| checkpoint_record(py, c)).collect()
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

#[pymethods]
impl CheckpointManager {
    /// The checkpoints of the sandboxes under `root`: a `SandboxManager` (its root) or a
    /// directory; without one, a folder of the manager's own under the system temp folder
    /// (removed, with every checkpoint in it, by `close()`). `store` (`s3://bucket/prefix`,
    /// or a directory): file checkpoints are written there too, for `restore_from_store` on
    /// another machine; a manager with a store and no `root` keeps its local copies under the
    /// default root (`$PATCHBOX_ROOT`, else `$HOME/.entropic/sandbox`).
    #[new]
    #[pyo3(signature = (root=None, *, store=None))]
    fn py_new(
        py: Python<'_>,
        root: Option<&Bound<'_, PyAny>>,
        store: Option<String>,
    ) -> PyResult<CheckpointManager> {
        let root: Option<PathBuf> = match root {
            None => None,
            Some(r) => Some(match r.cast::<SandboxManager>() {
                Ok(m) => PathBuf::from(m.get().root_path()?),
                Err(_) => r.extract::<PathBuf>()?,
            }),
        };
        let inner = match (root, store) {
            (None, None) => py.detach(RsCheckpoints::temporary).map_err(plan_err)?,
            (Some(root), None) => RsCheckpoints::new(root),
            (root, Some(url)) => {
                let url = patchbox::store::StoreUrl::parse(&url)
                    .map_err(|e| crate::errors::lib_err(patchbox::Error::from(e)))?;
                let root = match root {
                    Some(r) => r,
                    None => default_root()?,
                };
                RsCheckpoints::with_store(root, &url).map_err(plan_err)?
            }
        };
        Ok(CheckpointManager {
            inner: RwLock::new(Some(inner)),
        })
    }

    /// The checkpoints in the manager's object store, of every plan and sandbox, oldest
    /// first. Raises `SandboxError` without a store.
    fn list_stored(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let cps = py.detach(|| self.with(|m| m.list_stored()))?;
        wrap(py, cps)
    }

    /// Makes `sandbox` what the stored checkpoint `checkpoint_id` recorded (a sandbox of a
    /// copy of the same project state, on any machine); returns the checkpoint, now kept
    /// locally too, or `None` when the store has no such checkpoint.
    fn restore_from_store(
        &self,
        py: Python<'_>,
        sandbox: &Sandbox,
        checkpoint_id: String,
    ) -> PyResult<Option<Py<PyAny>>> {
        let sb = sandbox.inner.clone();
        let cp = py.detach(|| self.with(|m| m.restore_from_store(&sb, &checkpoint_id)))?;
        cp.map(|c| checkpoint_record(py, c)).transpose()
    }

    /// Removes the store's objects no stored checkpoint refers to and older than
    /// `grace_seconds`; returns how many went.
    #[pyo3(signature = (grace_seconds=3600.0))]
    fn prune_store(&self, py: Python<'_>, grace_seconds: f64) -> PyResult<usize> {
        let grace = std::time::Duration::from_secs_f64(grace_seconds.max(0.0));
        py.detach(|| self.with(|m| m.prune_store(grace)))
    }

    /// Where the checkpoints are stored (the root's `plans` folder, or the temporary folder).
    #[getter]
    fn storage_dir(&self) -> PyResult<String> {
        self.with(|m| Ok(path_str(m.storage_dir())))
    }

    /// Removes every checkpoint this manager made (with their folders, when it stores under
    /// the system temp folder); returns how many.
    fn cleanup(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| self.with(|m| m.cleanup()))
    }

    /// Records the state of `sandbox` now, at `phase`, with `metadata`. A `plan_id` that is
    /// not the sandbox's plan is refused (`SandboxError`).
    #[pyo3(signature = (sandbox, plan_id, phase, metadata=None))]
    fn create_checkpoint(
        &self,
        py: Python<'_>,
        sandbox: &Sandbox,
        plan_id: String,
        phase: String,
        metadata: Option<BTreeMap<String, String>>,
    ) -> PyResult<Py<PyAny>> {
        let sb = sandbox.inner.clone();
        let meta = metadata.unwrap_or_default();
        let cp = py.detach(|| self.with(|m| m.create_checkpoint(&sb, &plan_id, &phase, meta)))?;
        checkpoint_record(py, cp)
    }

    /// Makes the checkpoint's sandbox exactly what it was then; `False` when the checkpoint
    /// no longer exists (deleted, or its sandbox cleaned up).
    ///
    /// Only for a sandbox whose work is not committed: on a committed sandbox, of any
    /// strategy, it raises `SandboxStateError` (`from_status` "committed") and changes
    /// nothing. Undo the commit first (`sandbox.rollback()`), then roll back to the checkpoint.
    fn rollback_to(&self, py: Python<'_>, checkpoint: &Bound<'_, PyAny>) -> PyResult<bool> {
        let cp = checkpoint_of(checkpoint)?;
        py.detach(|| self.with(|m| m.rollback_to(&cp)))
    }

    /// Writes into `dest` (a directory that must not exist yet) the whole tree the sandbox had
    /// at `checkpoint` — the documentation's full-copy snapshot, made on demand — leaving the
    /// sandbox as it is; `False` when the checkpoint no longer exists. Only checkpoints of
    /// files (`copy_on_write`, `overlay`) have a tree: others raise `SandboxError`.
    fn materialize(
        &self,
        py: Python<'_>,
        checkpoint: &Bound<'_, PyAny>,
        dest: PathBuf,
    ) -> PyResult<bool> {
        let cp = checkpoint_of(checkpoint)?;
        py.detach(|| self.with(|m| m.materialize(&cp, &dest)))
    }

    /// The checkpoints of a sandbox this manager knows, oldest first.
    fn list_checkpoints(&self, py: Python<'_>, sandbox_id: String) -> PyResult<Vec<Py<PyAny>>> {
        let cps = py.detach(|| self.with(|m| m.list_checkpoints(&sandbox_id)))?;
        wrap(py, cps)
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
