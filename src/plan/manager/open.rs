//! Opening a plan manager over a root, and its registry of custom strategies: a manager
//! opened with a registry reopens the custom sandboxes on disk; one given a registry later
//! reopens those it left for want of it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{subdirs, PlanManager, Recovery, PLANS_DIR};
use crate::apply::store::{PrunePolicy, UndoStore};
use crate::plan::custom::registry::{self, StrategyRegistry};
use crate::plan::error::SandboxError;
use crate::plan::record::{Record, STATE_FILE};
use crate::plan::sandbox::Sandbox;
use crate::plan::strategy::Env;

impl PlanManager {
    /// Opens the manager of `root` (the library's sandbox root; plan sandboxes live in
    /// `<root>/plans`). Sandboxes on disk are loaded; interrupted commits are rolled back.
    pub fn open(root: impl AsRef<Path>) -> Result<PlanManager, SandboxError> {
        PlanManager::open_inner(root.as_ref(), None)
    }

    /// [`PlanManager::open`] with the custom strategies of `registry`: sandboxes of them can be
    /// made ([`Strategy::Custom`](crate::plan::Strategy::Custom)), and those on disk are
    /// reopened. (A manager opened without the registry of its custom sandboxes leaves them on
    /// disk, with a warning in [`PlanManager::recovery`]; [`PlanManager::set_registry`] then
    /// reopens them.)
    pub fn open_with_registry(
        root: impl AsRef<Path>,
        registry: Arc<StrategyRegistry>,
    ) -> Result<PlanManager, SandboxError> {
        PlanManager::open_inner(root.as_ref(), Some(registry))
    }

    /// Sets the registry of custom strategies, and reopens the custom sandboxes on disk that
    /// were left for want of it (now registered). Returns the ids of those reopened.
    pub fn set_registry(&self, registry: Arc<StrategyRegistry>) -> Vec<String> {
        *self.registry.write() = Some(registry);
        self.reopen_custom()
    }

    /// The registry of custom strategies, if the manager has one.
    pub fn registry(&self) -> Option<Arc<StrategyRegistry>> {
        self.registry.read().clone()
    }

    /// A sandbox of `record` on disk, opened by its strategy's factory.
    pub(super) fn open_sandbox(
        &self,
        record: Record,
        dir: PathBuf,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let registry = self.registry.read().clone();
        registry::open_sandbox(registry.as_deref(), &self.env, record, dir)
    }

    /// Reopens the custom sandboxes on disk that the manager does not hold yet and whose
    /// strategy is now registered (call after registering a strategy). Returns their ids.
    pub fn reopen_custom(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(plans) = self.plan_dirs() else {
            return out;
        };
        for (_, plan_dir) in plans {
            for dir in subdirs(&plan_dir) {
                if !dir.join(STATE_FILE).exists() {
                    continue;
                }
                let Ok(r) = Record::load(&dir) else { continue };
                if !r.strategy.is_custom() || r.status.is_terminal() {
                    continue;
                }
                // Its ids were checked when it was read: a record naming no plan id was
                // refused above.
                let key = (r.plan_id.clone(), r.resource_id.clone());
                let slot = self.table.lock().entry(key.clone()).or_default().clone();
                let mut filled = slot.lock();
                if filled.is_some() {
                    continue;
                }
                let id = r.sandbox_id.clone();
                match self.open_sandbox(r, dir.clone()) {
                    Ok(sb) => {
                        *filled = Some(sb);
                        out.push(id.into_string());
                    }
                    Err(_) => {
                        drop(filled);
                        self.forget_empty(&key);
                    }
                }
            }
        }
        out
    }

    fn open_inner(
        root: &Path,
        registry: Option<Arc<StrategyRegistry>>,
    ) -> Result<PlanManager, SandboxError> {
        std::fs::create_dir_all(root.join(PLANS_DIR)).map_err(|e| {
            SandboxError::from_lower(
                None,
                "create plans directory",
                crate::Error::io("create directory", root.join(PLANS_DIR), e),
            )
        })?;
        let root = std::fs::canonicalize(root).map_err(|e| {
            SandboxError::from_lower(None, "resolve root", crate::Error::io("resolve", root, e))
        })?;
        let plans_dir = root.join(PLANS_DIR);
        let env = Arc::new(Env {
            undo: UndoStore::new(&plans_dir).with_policy(PrunePolicy {
                keep_per_project: 1000,
                ..PrunePolicy::default()
            }),
            exclude: vec![root.clone()],
            lowers: crate::isolation::snapshot::store_dir(&root),
            lower_bases: Mutex::new(HashMap::new()),
            plans_dir,
        });
        let mut mgr = PlanManager {
            root,
            env,
            registry: parking_lot::RwLock::new(registry),
            table: Mutex::new(BTreeMap::new()),
            boundaries: Mutex::new(HashMap::new()),
            recovery: Mutex::new(Recovery::default()),
            made: Mutex::new(HashSet::new()),
            cleanup_on_drop: AtomicBool::new(true),
        };
        mgr.load()?;
        Ok(mgr)
    }

    /// Opens the manager of the default root (`$PATCHBOX_ROOT`, else
    /// `$HOME/.entropic/sandbox`).
    pub fn open_default() -> Result<PlanManager, SandboxError> {
        let root = crate::isolation::default_root()
            .map_err(|e| SandboxError::from_lower(None, "default root", e))?;
        PlanManager::open(root)
    }

    /// Whether dropping the manager cleans up the sandboxes that hold no uncommitted work
    /// (on by default). Tools that only look at plans (the CLI's `plan list`) turn it off.
    pub fn set_cleanup_on_drop(&self, on: bool) {
        self.cleanup_on_drop.store(on, Ordering::Relaxed);
    }
}
