//! `SandboxManager` and `Sandbox`: the plan layer's manager (the Rust `PlanManager`) and its
//! sandboxes (`Arc<dyn Sandbox>`), in the plan executors' vocabulary.
//!
//! Why: a Python plan executor swaps its sandbox layer for this one without renaming a call.
//! Invariants:
//! - every call that touches the disk (create, commit, commit_all, diff, cleanup…) releases
//!   the GIL; a custom strategy written in Python re-takes it for its own operations;
//! - one Python object per sandbox: the manager hands out the same `Sandbox` for the same
//!   sandbox id, so `manager.get_sandbox(p, r) is sb` holds, as the docs' boundary example
//!   asserts;
//! - nothing is thrown away silently: `with manager:` closes it on exit (sandboxes holding
//!   no uncommitted work are cleaned up, an active one with changes stays on disk for the
//!   next manager, as the Rust `Drop`); a sandbox keeps its manager alive (a manager
//!   collected while its sandboxes are in use does not clean them up under them);
//!   `with sandbox:` cleans the sandbox up on exit unless
//!   it holds uncommitted changes (status `active` with a non-empty diff), which it keeps;
//! - errors are the classes of `errors.rs`, with the path in the message.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;

use patchbox::plan::custom::StrategyRegistry as RsStrategyRegistry;
use patchbox::plan::{PlanManager, Sandbox as RsSandbox, SandboxError, Status};

use crate::boundary::{Resource, ResourceRegistry};
use crate::custom::StrategyRegistry;
use crate::errors::plan_err;
use crate::plan_model::{
    commit_record, context_record, path_str, strategy_arg, SandboxDiff, SandboxStatus, SnapshotInfo,
};

/// The default root: `$PATCHBOX_ROOT`, else `$HOME/.entropic/sandbox`.
pub(crate) fn default_root() -> PyResult<PathBuf> {
    patchbox::session::layout::default_root()
        .map_err(|e| plan_err(SandboxError::from_lower(None, "default root", e)))
}

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
        let sb = self.inner.clone();
        let ctx = py.detach(|| sb.create(plan_id)).map_err(plan_err)?;
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

/// `(plan id, sandbox ids rolled back)` of interrupted commits, and warnings.
type RecoveryReport = (Vec<(String, Vec<String>)>, Vec<String>);

/// Every sandbox of every plan of one engine, found again after a crash.
#[pyclass(frozen, module = "patchbox._native")]
pub struct SandboxManager {
    inner: RwLock<Option<Arc<PlanManager>>>,
    registry: Arc<RsStrategyRegistry>,
    /// sandbox id → its one Python object.
    objects: Mutex<HashMap<String, Py<Sandbox>>>,
}

impl SandboxManager {
    fn mgr(&self) -> PyResult<Arc<PlanManager>> {
        self.inner
            .read()
            .clone()
            .ok_or_else(|| plan_err(SandboxError::sandbox(None, "the SandboxManager is closed")))
    }

    /// The one Python object of `sb`.
    fn object(&self, py: Python<'_>, sb: Arc<dyn RsSandbox>) -> PyResult<Py<Sandbox>> {
        let mut objects = self.objects.lock();
        if let Some(o) = objects.get(sb.sandbox_id()) {
            if Arc::ptr_eq(&o.get().inner, &sb) {
                return Ok(o.clone_ref(py));
            }
        }
        let id = sb.sandbox_id().to_string();
        let o = crate::strategies::new_object(py, sb, self.inner.read().clone())?;
        objects.insert(id, o.clone_ref(py));
        Ok(o)
    }

    /// The Rust manager (an error once closed).
    pub(crate) fn plan_manager(&self) -> PyResult<Arc<PlanManager>> {
        self.mgr()
    }

    /// The root (canonical).
    pub(crate) fn root_path(&self) -> PyResult<String> {
        Ok(path_str(self.mgr()?.root()))
    }

    /// Forgets the objects of cleaned-up sandboxes.
    fn prune_objects(&self, py: Python<'_>) {
        // Statuses are read detached and without the table's lock (see `status`).
        let all: Vec<(String, Arc<dyn RsSandbox>)> = self
            .objects
            .lock()
            .iter()
            .map(|(k, o)| (k.clone(), o.get().inner.clone()))
            .collect();
        let dead: Vec<String> = py.detach(|| {
            all.into_iter()
                .filter(|(_, sb)| sb.status() == Status::CleanedUp)
                .map(|(k, _)| k)
                .collect()
        });
        let mut objects = self.objects.lock();
        for k in dead {
            objects.remove(&k);
        }
    }
}

#[pymethods]
impl SandboxManager {
    /// Opens the manager of `root` (default: `$PATCHBOX_ROOT`, else
    /// `$HOME/.entropic/sandbox`; plan sandboxes live in `<root>/plans`). Sandboxes on disk
    /// are loaded; an interrupted `commit_all` is rolled back. `custom_registry` holds the
    /// custom strategies sandboxes can be made of.
    #[new]
    #[pyo3(signature = (root=None, custom_registry=None))]
    fn py_new(
        py: Python<'_>,
        root: Option<PathBuf>,
        custom_registry: Option<PyRef<'_, StrategyRegistry>>,
    ) -> PyResult<SandboxManager> {
        let root = match root {
            Some(r) => r,
            None => default_root()?,
        };
        let registry = custom_registry
            .map(|r| r.inner.clone())
            .unwrap_or_else(|| Arc::new(RsStrategyRegistry::new()));
        let reg = registry.clone();
        let mgr = py
            .detach(|| PlanManager::open_with_registry(&root, reg))
            .map_err(plan_err)?;
        Ok(SandboxManager {
            inner: RwLock::new(Some(Arc::new(mgr))),
            registry,
            objects: Mutex::new(HashMap::new()),
        })
    }

    /// The root (canonical).
    #[getter]
    fn root(&self) -> PyResult<String> {
        self.root_path()
    }

    /// What opening found: `(plan_id, [sandbox ids])` of interrupted commits rolled back,
    /// and warnings.
    fn recovery(&self) -> PyResult<RecoveryReport> {
        let m = self.mgr()?;
        let r = m.recovery();
        Ok((r.rolled_back.clone(), r.warnings.clone()))
    }

    /// Waits for the plan's lock and settles what a process that died holding it left (an
    /// interrupted `commit_all` rolled back; a git it started waited for); returns
    /// `recovery()` afterwards.
    fn recover(&self, py: Python<'_>, plan_id: String) -> PyResult<RecoveryReport> {
        let m = self.mgr()?;
        let r = py.detach(|| m.recover(&plan_id)).map_err(plan_err)?;
        Ok((r.rolled_back, r.warnings))
    }

    /// Plans another process held the lock of when this manager opened (a commit was
    /// running): left to it; `recover(plan_id)` settles one later.
    fn busy_plans(&self) -> PyResult<Vec<String>> {
        Ok(self.mgr()?.recovery().busy)
    }

    /// The sandbox of `(plan_id, resource_id)`, made and created on first use with
    /// `sandbox_strategy` (a `SandboxStrategy` or a name) over `original_path`; later calls
    /// return the same sandbox.
    #[pyo3(signature = (plan_id, resource_id, original_path, sandbox_strategy))]
    fn get_or_create_sandbox(
        &self,
        py: Python<'_>,
        plan_id: String,
        resource_id: String,
        original_path: PathBuf,
        sandbox_strategy: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Sandbox>> {
        let strategy = strategy_arg(sandbox_strategy)?;
        let m = self.mgr()?;
        let sb = py
            .detach(|| m.get_or_create_sandbox(&plan_id, &resource_id, &original_path, strategy))
            .map_err(plan_err)?;
        self.object(py, sb)
    }

    /// The sandbox of `(plan_id, resource_id)`, or `None`.
    fn get_sandbox(
        &self,
        py: Python<'_>,
        plan_id: &str,
        resource_id: &str,
    ) -> PyResult<Option<Py<Sandbox>>> {
        let m = self.mgr()?;
        py.detach(|| m.get_sandbox(plan_id, resource_id))
            .map(|sb| self.object(py, sb))
            .transpose()
    }

    /// Every sandbox of the plan, in creation order.
    fn list_sandboxes(&self, py: Python<'_>, plan_id: &str) -> PyResult<Vec<Py<Sandbox>>> {
        let m = self.mgr()?;
        py.detach(|| m.list_sandboxes(plan_id))
            .into_iter()
            .map(|sb| self.object(py, sb))
            .collect()
    }

    /// The ids of every plan with sandboxes.
    fn list_plans(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let m = self.mgr()?;
        Ok(py.detach(|| m.list_plans()))
    }

    /// Commits every created or active sandbox of the plan, all or nothing; returns their
    /// results. A failure rolls the committed ones back (newest first); a sandbox-level
    /// failure (a `SandboxError`: a conflict, a refused lock, a custom strategy's
    /// `SandboxCommitError`) then returns the one failed `CommitResult`; any other raises
    /// `AtomicCommitError` with `rolled_back_ids` and `failed_rollback_ids`. The keyword
    /// arguments say what produced the work (its provenance); each result's `metadata`
    /// carries them under `provenance.*`.
    #[pyo3(signature = (plan_id, *, command=None, cwd=None, exit_status=None, started_ms=None, ended_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn commit_all(
        &self,
        py: Python<'_>,
        plan_id: String,
        command: Option<Vec<String>>,
        cwd: Option<PathBuf>,
        exit_status: Option<i32>,
        started_ms: Option<u64>,
        ended_ms: Option<u64>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let m = self.mgr()?;
        let provenance = patchbox::session::provenance::Provenance {
            command: command.unwrap_or_default(),
            cwd: cwd.map(|c| c.to_string_lossy().into_owned()),
            exit_status,
            started_ms,
            ended_ms,
        };
        let results = py
            .detach(|| m.commit_all_as(&plan_id, &provenance))
            .map_err(plan_err)?;
        results.into_iter().map(|r| commit_record(py, r)).collect()
    }

    /// Rolls back every active and committed sandbox of the plan; raises the first error
    /// after trying them all.
    fn rollback_all(&self, py: Python<'_>, plan_id: String) -> PyResult<()> {
        let m = self.mgr()?;
        py.detach(|| m.rollback_all(&plan_id)).map_err(plan_err)
    }

    /// Cleans up every sandbox of the plan and forgets them; raises the first error after
    /// trying them all.
    fn cleanup_all(&self, py: Python<'_>, plan_id: String) -> PyResult<()> {
        let m = self.mgr()?;
        let r = py.detach(|| m.cleanup_all(&plan_id)).map_err(plan_err);
        self.prune_objects(py);
        r
    }

    /// Cleans up the sandboxes whose work is over (committed, rolled back, errored) and the
    /// remains of interrupted creations; returns how many were removed.
    fn cleanup_abandoned(&self, py: Python<'_>) -> PyResult<usize> {
        let m = self.mgr()?;
        let r = py.detach(|| m.cleanup_abandoned()).map_err(plan_err);
        self.prune_objects(py);
        r
    }

    /// Takes a stable snapshot of `original` that every `overlay` sandbox created for it
    /// afterwards (any plan) uses as its lower layer instead of copying the tree: their
    /// creation then costs a few directories and a mount, whatever the tree's size. Edits
    /// made to the original later are not in those sandboxes' view; their commits merge
    /// with them (3-way) or refuse on a conflict.
    fn prepare_snapshot(&self, py: Python<'_>, original: PathBuf) -> PyResult<SnapshotInfo> {
        let m = self.mgr()?;
        let info = py
            .detach(|| m.prepare_snapshot(&original))
            .map_err(plan_err)?;
        SnapshotInfo::new(py, info)
    }

    /// Every ready shared snapshot under the root, oldest first.
    fn snapshots(&self, py: Python<'_>) -> PyResult<Vec<SnapshotInfo>> {
        let m = self.mgr()?;
        py.detach(|| m.snapshots())
            .into_iter()
            .map(|s| SnapshotInfo::new(py, s))
            .collect()
    }

    /// Removes every shared snapshot of `original` that no sandbox uses; returns how many.
    fn drop_snapshots(&self, py: Python<'_>, original: PathBuf) -> PyResult<usize> {
        let m = self.mgr()?;
        py.detach(|| m.drop_snapshots(&original)).map_err(plan_err)
    }

    /// The sandbox of the boundary `resource` belongs to (shared by every resource under
    /// that boundary: the same object). Its paths are relative to the boundary resource;
    /// `resource_prefix` says where `resource` is under it.
    fn get_or_create_sandbox_for_resource(
        &self,
        py: Python<'_>,
        plan_id: String,
        resource: &Resource,
        resource_registry: &ResourceRegistry,
    ) -> PyResult<Py<Sandbox>> {
        let m = self.mgr()?;
        let reg = resource_registry.snapshot();
        let r = resource.inner.clone();
        let view = py
            .detach(|| m.get_or_create_sandbox_for_resource(&plan_id, &r, &reg))
            .map_err(plan_err)?;
        self.object(py, view.sandbox)
    }

    /// The boundary key of `resource`: the id of the resource whose sandbox it shares
    /// (cached until `clear_boundary_cache`).
    fn resolve_sandbox_key(
        &self,
        py: Python<'_>,
        resource: &Resource,
        resource_registry: &ResourceRegistry,
    ) -> PyResult<String> {
        let m = self.mgr()?;
        let reg = resource_registry.snapshot();
        py.detach(|| m.resolve_sandbox_key(&resource.inner, &reg))
            .map_err(plan_err)
    }

    /// Where `resource` lies under its boundary (`""` for the boundary itself): join it to
    /// the paths given to the shared sandbox's `get_path`.
    fn resource_prefix(
        &self,
        py: Python<'_>,
        plan_id: String,
        resource: &Resource,
        resource_registry: &ResourceRegistry,
    ) -> PyResult<String> {
        let m = self.mgr()?;
        let reg = resource_registry.snapshot();
        let r = resource.inner.clone();
        let view = py
            .detach(|| m.get_or_create_sandbox_for_resource(&plan_id, &r, &reg))
            .map_err(plan_err)?;
        Ok(path_str(&view.prefix))
    }

    /// Drops the boundary cache (call when the resource registry changes).
    fn clear_boundary_cache(&self) -> PyResult<()> {
        self.mgr()?.clear_boundary_cache();
        Ok(())
    }

    /// Whether a custom strategy is registered under `name`.
    fn has_custom_strategy(&self, name: &str) -> bool {
        self.registry.has_custom_strategy(name)
    }

    /// Reopens the custom sandboxes on disk whose strategy is now registered (call after
    /// registering one); returns their ids.
    fn reopen_custom(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let m = self.mgr()?;
        Ok(py.detach(|| m.reopen_custom()))
    }

    /// Closes the manager now: sandboxes holding no uncommitted work are cleaned up; an
    /// active one with changes stays on disk for the next manager. Idempotent.
    fn close(&self, py: Python<'_>) {
        let m = self.inner.write().take();
        self.objects.lock().clear();
        if let Some(m) = m {
            py.detach(move || {
                settle(&m);
                drop(m)
            });
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

/// What closing a manager does now, whoever still holds its sandboxes (the Rust manager's
/// `Drop` does the same when the last reference goes): cleans up every sandbox holding no
/// uncommitted work; keeps an active sandbox with changes (or whose diff fails) on disk.
fn settle(m: &PlanManager) {
    for plan in m.list_plans() {
        for s in m.list_sandboxes(&plan) {
            let keep = match s.status() {
                Status::Active => s.diff().map(|d| !d.entries.is_empty()).unwrap_or(true),
                Status::Pending | Status::CleanedUp => true,
                _ => false,
            };
            if !keep {
                let _ = s.cleanup();
            }
        }
    }
}

/// Registers the plan layer's classes (called from `lib.rs`).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<crate::plan_model::SandboxStatus>()?;
    m.add_class::<crate::plan_model::SandboxStrategy>()?;
    m.add_class::<crate::plan_model::SnapshotInfo>()?;
    m.add_class::<crate::plan_model::DiffEntry>()?;
    m.add_class::<crate::plan_model::SandboxDiff>()?;
    m.add_class::<crate::plan_model::DiffView>()?;
    m.add_class::<crate::boundary::Resource>()?;
    m.add_class::<crate::boundary::ResourceRegistry>()?;
    m.add_class::<Sandbox>()?;
    crate::strategies::register(m)?;
    m.add_class::<SandboxManager>()?;
    m.add_class::<crate::checkpoint::CheckpointManager>()?;
    m.add_class::<crate::custom::StrategyRegistry>()?;
    m.add_class::<crate::adapter::BuiltInSandboxStrategyAdapter>()?;
    m.add_class::<crate::phases::PhaseRunner>()?;
    // The protocol's operations, in order: the one list Python strategies are checked against.
    m.add(
        "STRATEGY_OPERATIONS",
        patchbox::plan::custom::OPERATIONS.to_vec(),
    )?;
    Ok(())
}
