//! How the manager's table follows the disk, and recovery: every operation that changes a
//! plan takes the plan's lock and first learns the sandboxes other managers made; a holder
//! that took the lock itself (the proof that no other committer is alive) rolls back an
//! interrupted `commit_all` from its journal and settles commits left in flight. The LIFO
//! rollback that recovery and a failed `commit_all` share is here too.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::{subdirs, PlanManager, Recovery};
use crate::id::{IntoId, PlanId, SandboxId};
use crate::plan::error::SandboxError;
use crate::plan::journal::CommitJournal;
use crate::plan::lock::PlanGuard;
use crate::plan::record::{Record, STATE_FILE};
use crate::plan::sandbox::Sandbox;
use crate::plan::status::Status;

impl PlanManager {
    /// Loads every plan's sandboxes; a plan nobody holds the lock of is settled (an
    /// interrupted `commit_all` rolled back, commits left in flight settled); a plan whose
    /// lock is held elsewhere is left to its holder ([`Recovery::busy`]).
    pub(super) fn load(&mut self) -> Result<(), SandboxError> {
        for (name, plan_dir) in self.plan_dirs()? {
            // Only a plan id names a plan directory this library made: another name is not
            // a plan to load or settle.
            let plan_id = match PlanId::parse(&name) {
                Ok(id) => id,
                Err(e) => {
                    self.recovery
                        .get_mut()
                        .warnings
                        .push(format!("{}: {e}", plan_dir.display()));
                    continue;
                }
            };
            self.sync_plan(&plan_id);
            match PlanGuard::try_acquire_for(&plan_dir, crate::plan::lock::FORK_PATIENCE)? {
                Some(guard) => self.recover_plan(&plan_id, &guard)?,
                None => self.recovery.get_mut().busy.push(plan_id.into_string()),
            }
        }
        Ok(())
    }

    /// Makes the table know every sandbox of `plan_id` on disk (another manager, maybe in
    /// another process, may have made some): a sandbox the table lacks is opened. The
    /// newest of a resource's sandboxes holds its slot unless the slot's is still in use.
    /// Changes nothing on disk.
    pub(super) fn sync_plan(&self, plan_id: &PlanId) {
        let plan_dir = self.plan_dir(plan_id);
        let known: HashSet<String> = self
            .slots()
            .into_iter()
            .filter(|((p, _), _)| p == plan_id)
            .filter_map(|(_, s)| s.lock().as_ref().map(|s| s.sandbox_id().to_string()))
            .collect();
        for dir in subdirs(&plan_dir) {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if known.contains(name) || !dir.join(STATE_FILE).exists() {
                continue;
            }
            let record = match Record::load(&dir) {
                Ok(r) if *plan_id == r.plan_id => r,
                Ok(_) => continue,
                Err(e) => {
                    self.warn(format!("{}: {e}", dir.display()));
                    continue;
                }
            };
            let key = (plan_id.clone(), record.resource_id.clone());
            let slot = self.table.lock().entry(key.clone()).or_default().clone();
            let mut filled = slot.lock();
            let replace = match filled.as_ref() {
                None => true,
                Some(s) => s.status().is_terminal() && s.sandbox_id() < record.sandbox_id.as_str(),
            };
            if !replace {
                continue;
            }
            match self.open_sandbox(record, dir.clone()) {
                Ok(sb) => *filled = Some(sb),
                Err(e) => {
                    self.warn(format!("{}: {e}", dir.display()));
                    drop(filled);
                    self.forget_empty(&key);
                }
            }
        }
    }

    /// Takes the plan's lock for an operation that changes the plan. The table is synced
    /// with the disk first; a holder that took the lock itself settles what a dead holder
    /// left (see [`PlanManager::recover_plan`]).
    pub(super) fn lock_plan(&self, plan_id: &PlanId) -> Result<PlanGuard, SandboxError> {
        let guard = PlanGuard::acquire(&self.plan_dir(plan_id))?;
        self.sync_plan(plan_id);
        if guard.is_fresh() {
            self.recover_plan(plan_id, &guard)?;
        }
        Ok(guard)
    }

    /// Waits for the plan's lock and settles what a holder that died left: an interrupted
    /// `commit_all` is rolled back, commits and reverts left in flight are settled (a git
    /// that outlived its caller is waited for: it holds the lock until it exits). For a plan
    /// [`Recovery::busy`] named at open. Returns [`PlanManager::recovery`] afterwards.
    pub fn recover(&self, plan_id: impl IntoId<PlanId>) -> Result<Recovery, SandboxError> {
        drop(self.lock_plan(&plan_id.into_id()?)?);
        Ok(self.recovery())
    }

    /// Under the plan's lock, taken by this thread itself (`guard` proves that no
    /// `commit_all` of the plan is running anywhere): an interrupted `commit_all` (its
    /// journal) is rolled back, and commits left in flight are settled.
    fn recover_plan(&self, plan_id: &PlanId, guard: &PlanGuard) -> Result<(), SandboxError> {
        debug_assert!(guard.is_fresh());
        let plan_dir = guard.plan_dir();
        if let Some(j) = CommitJournal::read(plan_dir)? {
            let (undone, failed) = self.roll_back_lifo(plan_id, &j.order);
            for (id, e) in failed {
                self.warn(format!(
                    "plan {plan_id}: cannot roll back sandbox {id}: {e}"
                ));
            }
            CommitJournal::remove(plan_dir)?;
            self.recovery
                .lock()
                .rolled_back
                .push((plan_id.to_string(), undone));
        }
        for s in self.sandboxes_of(plan_id) {
            if matches!(s.status(), Status::Active | Status::Committed) {
                if let Err(e) = s.settle_in_flight() {
                    self.warn(format!(
                        "plan {plan_id}: cannot settle sandbox {}: {e}",
                        s.sandbox_id()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Rolls back, newest first, every sandbox of `order` that is `Committed`, after
    /// settling a commit one left in flight (a panic between its change landing and its
    /// status saying so: it is `Committed` then, and undone with the others). Returns the
    /// ids undone (in that order) and those that could not be.
    pub(super) fn roll_back_lifo(
        &self,
        plan_id: &PlanId,
        order: &[SandboxId],
    ) -> (Vec<String>, Vec<(String, String)>) {
        let by_id: HashMap<String, Arc<dyn Sandbox>> = self
            .sandboxes_of(plan_id)
            .into_iter()
            .map(|s| (s.sandbox_id().to_string(), s))
            .collect();
        let mut undone = Vec::new();
        let mut failed = Vec::new();
        for id in order.iter().rev() {
            let Some(s) = by_id.get(id.as_str()) else {
                continue;
            };
            // Also brings the status up to what is on disk (another process's doing).
            if let Err(e) = s.settle_in_flight() {
                failed.push((id.to_string(), e.to_string()));
                continue;
            }
            if s.status() != Status::Committed {
                continue;
            }
            match s.rollback() {
                Ok(()) => {
                    // Compensation, not abandonment: the sandbox keeps its changes and is
                    // active again (RolledBack → Active), so the plan can commit again.
                    let _ = s.get_path(Path::new(""));
                    undone.push(id.to_string())
                }
                Err(e) => failed.push((id.to_string(), e.to_string())),
            }
        }
        (undone, failed)
    }
}
