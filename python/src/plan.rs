//! `SandboxManager`: the plan layer's manager (the Rust `PlanManager`), handing out the
//! sandboxes of `sandbox.rs` (`Arc<dyn Sandbox>`), in the plan executors' vocabulary.
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
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;

use patchbox::plan::custom::StrategyRegistry as RsStrategyRegistry;
use patchbox::plan::{PlanManager, Sandbox as RsSandbox, SandboxError, Status};

use crate::boundary::{Resource, ResourceRegistry};
use crate::custom::StrategyRegistry;
use crate::errors::plan_err;
use crate::plan_model::{commit_record, default_root, path_str, strategy_arg, SnapshotInfo};
use crate::sandbox::Sandbox;

/// A record's JSON text as Python values (dicts, lists, str, int, None), by the standard
/// `json` module: the same documents a plugin parsing the CLI's output gets.
fn json_loads(py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
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

    /// The plans and their sandboxes as the records `patchbox plan list --json [PLAN]`
    /// prints (a list of dicts, see `docs/json.md`): every plan, or only `plan_id`.
    #[pyo3(signature = (plan_id=None))]
    fn plan_records(&self, py: Python<'_>, plan_id: Option<String>) -> PyResult<Py<PyAny>> {
        let m = self.mgr()?;
        let text = py.detach(|| {
            patchbox::records::to_json(&patchbox::records::plan_records(&m, plan_id.as_deref()))
        });
        json_loads(py, &text)
    }

    /// The changes of the plan's created and active sandboxes as the records `patchbox plan
    /// diff --json PLAN` prints (a list of dicts with `files` and `patch`, see
    /// `docs/json.md`).
    fn diff_records(&self, py: Python<'_>, plan_id: String) -> PyResult<Py<PyAny>> {
        let m = self.mgr()?;
        let text = py
            .detach(|| {
                patchbox::records::plan_diff_records(&m, &plan_id)
                    .map(|r| patchbox::records::to_json(&r))
            })
            .map_err(plan_err)?;
        json_loads(py, &text)
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
            patchbox::plan::manager::clean_up_if_idle(s.as_ref());
        }
    }
}
