//! Making and finding sandboxes: the sandbox of a `(plan, resource)` pair is made on first
//! use, once, under the plan's lock (so a second caller, in this process or another, finds
//! the first one's), and looked up again from the table after it learnt the disk.

use std::path::Path;
use std::sync::Arc;

use super::{forget_plan_dir, Key, PlanManager};
use crate::id::{IntoId, PlanId};
use crate::isolation::snapshot;
use crate::plan::custom::registry;
use crate::plan::error::SandboxError;
use crate::plan::model::Strategy;
use crate::plan::sandbox::Sandbox;

impl PlanManager {
    /// The sandbox of `(plan_id, resource_id)`, made and created on first use with
    /// `strategy` over `original_path`. Later calls return the same sandbox (whatever
    /// strategy they name). Concurrent first calls make it once. A [`Strategy::Custom`] needs
    /// its name registered in the manager's registry ([`PlanManager::open_with_registry`]);
    /// otherwise the error names the built-in and registered strategies. A `plan_id` that is
    /// not a [`PlanId`] is refused first.
    pub fn get_or_create_sandbox(
        &self,
        plan_id: impl IntoId<PlanId>,
        resource_id: &str,
        original_path: impl AsRef<Path>,
        strategy: Strategy,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let plan_id = &plan_id.into_id()?;
        if resource_id.is_empty() {
            return Err(SandboxError::sandbox(
                None,
                "a resource id must not be empty",
            ));
        }
        // Under the plan's lock, after the table learnt the sandboxes made elsewhere: a
        // second caller, in this process or another, finds the first one's sandbox.
        let plan = self.lock_plan(plan_id)?;
        let key = (plan_id.clone(), resource_id.to_string());
        let slot = self.table.lock().entry(key.clone()).or_default().clone();
        let mut filled = slot.lock();
        if let Some(sb) = filled.as_ref() {
            if !sb.status().is_terminal() {
                return Ok(sb.clone());
            }
        }
        let original = original_path.as_ref();
        let meta = std::fs::metadata(original);
        // A custom strategy's resource need not be a directory (it resolves it itself).
        let (fits, want) = if strategy.is_custom() {
            (meta.is_ok(), "there")
        } else if strategy.resource_is_file() {
            (meta.as_ref().is_ok_and(|m| m.is_file()), "a file")
        } else {
            (meta.as_ref().is_ok_and(|m| m.is_dir()), "a directory")
        };
        if !fits {
            drop(filled);
            self.forget_empty(&key);
            forget_plan_dir(&plan);
            return Err(SandboxError::Creation {
                resource_id: resource_id.to_string(),
                reason: format!("{} is not {want} (strategy {strategy})", original.display()),
                source: None,
            });
        }
        // An overlay sandbox takes a shared snapshot, or its plan's own one, or makes the
        // latter, as a copy_on_write one does: no sweep removes one meanwhile.
        let _lower_lock = if matches!(strategy, Strategy::Overlay | Strategy::CopyOnWrite) {
            Some(
                snapshot::lock_shared(&self.env.lowers)
                    .map_err(|e| SandboxError::from_lower(None, "lock the shared snapshots", e))?,
            )
        } else {
            None
        };
        let registry = self.registry.read().clone();
        let made = registry::new_sandbox(
            registry.as_deref(),
            &strategy,
            &self.env,
            &self.plan_dir(plan_id),
            resource_id,
            original,
        )
        .and_then(|sb| sb.create(plan_id).map(|_| sb));
        match made {
            Ok(sb) => {
                self.made.lock().insert(sb.sandbox_id().to_string());
                *filled = Some(sb.clone());
                Ok(sb)
            }
            Err(e) => {
                drop(filled);
                self.forget_empty(&key);
                forget_plan_dir(&plan);
                Err(e)
            }
        }
    }

    /// Removes the slot of `key` if no sandbox was made in it (a failed creation).
    pub(super) fn forget_empty(&self, key: &Key) {
        let mut table = self.table.lock();
        if table
            .get(key)
            .is_some_and(|s| s.try_lock().is_some_and(|s| s.is_none()))
        {
            table.remove(key);
        }
    }

    /// The sandbox of `(plan_id, resource_id)`, if one was made (none when `plan_id` is not
    /// a [`PlanId`]).
    pub fn get_sandbox(
        &self,
        plan_id: impl IntoId<PlanId>,
        resource_id: &str,
    ) -> Option<Arc<dyn Sandbox>> {
        let plan_id = plan_id.into_id().ok()?;
        self.sync_plan(&plan_id);
        let slot = self
            .table
            .lock()
            .get(&(plan_id, resource_id.to_string()))
            .cloned()?;
        let sb = slot.lock().clone();
        sb
    }

    /// Every sandbox of `plan_id`, in creation order (those other managers of the root made
    /// too). A read: nothing is changed or recovered. None when `plan_id` is not a
    /// [`PlanId`].
    pub fn list_sandboxes(&self, plan_id: impl IntoId<PlanId>) -> Vec<Arc<dyn Sandbox>> {
        match plan_id.into_id() {
            Ok(plan_id) => self.sandboxes_of(&plan_id),
            Err(_) => Vec::new(),
        }
    }

    /// [`PlanManager::list_sandboxes`] of a plan id already checked.
    pub(super) fn sandboxes_of(&self, plan_id: &PlanId) -> Vec<Arc<dyn Sandbox>> {
        self.sync_plan(plan_id);
        let mut out: Vec<Arc<dyn Sandbox>> = self
            .slots()
            .into_iter()
            .filter(|((p, _), _)| p == plan_id)
            .filter_map(|(_, s)| s.lock().clone())
            .collect();
        out.sort_by(|a, b| a.sandbox_id().cmp(b.sandbox_id()));
        out
    }

    /// The ids of every plan with sandboxes.
    pub fn list_plans(&self) -> Vec<String> {
        if let Ok(plans) = self.plan_dirs() {
            // A directory whose name is not a plan id holds no plan (see `load`).
            for p in plans.iter().filter_map(|(p, _)| PlanId::parse(p).ok()) {
                self.sync_plan(&p);
            }
        }
        let mut plans: Vec<String> = self
            .slots()
            .into_iter()
            .filter(|(_, s)| s.lock().is_some())
            .map(|((p, _), _)| p.into_string())
            .collect();
        plans.dedup();
        plans
    }
}
