//! Ending a plan's sandboxes: `rollback_all`, `cleanup_all`, `cleanup_abandoned` (work that
//! is over, half-made sandboxes, unused shared snapshots), and what dropping the manager
//! cleans up (only sandboxes it made that hold no uncommitted work: never lose work).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use super::{forget_plan_dir, subdirs, PlanManager};
use crate::id::{IntoId, PlanId};
use crate::isolation::prune::Scope;
use crate::plan::error::SandboxError;
use crate::plan::record::STATE_FILE;
use crate::plan::sandbox::Sandbox;
use crate::plan::status::Status;
use crate::plan::strategy;

impl PlanManager {
    /// Rolls back every `Active` (discarding its changes) and `Committed` (undoing its
    /// commit) sandbox of the plan; the first error is returned after trying them all.
    pub fn rollback_all(&self, plan_id: impl IntoId<PlanId>) -> Result<(), SandboxError> {
        let plan_id = &plan_id.into_id()?;
        let _plan = self.lock_plan(plan_id)?;
        let mut first = None;
        for s in self.sandboxes_of(plan_id).into_iter().rev() {
            if matches!(s.status(), Status::Active | Status::Committed) {
                if let Err(e) = s.rollback() {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Cleans up every sandbox of the plan (an active one's changes are discarded) and
    /// forgets them; the first error is returned after trying them all.
    pub fn cleanup_all(&self, plan_id: impl IntoId<PlanId>) -> Result<(), SandboxError> {
        let plan_id = &plan_id.into_id()?;
        let plan = self.lock_plan(plan_id)?;
        let mut first = None;
        for s in self.sandboxes_of(plan_id) {
            if let Err(e) = s.cleanup() {
                first.get_or_insert(e);
            }
        }
        self.table.lock().retain(|(p, _), slot| {
            p != plan_id
                || slot
                    .lock()
                    .as_ref()
                    .is_some_and(|s| !s.status().is_terminal())
        });
        if first.is_none() {
            forget_plan_dir(&plan);
        }
        first.map_or(Ok(()), Err)
    }

    /// Cleans up sandboxes whose work is over (`Committed`, `RolledBack`, `Errored`), the
    /// remains of creations a crash interrupted, and the shared snapshots no sandbox uses
    /// that are not the newest of their original; returns how many were removed.
    pub fn cleanup_abandoned(&self) -> Result<usize, SandboxError> {
        let mut n = 0;
        // Every plan's lock, in turn order: no sandbox is half-made or in use meanwhile.
        let mut guards = Vec::new();
        for (name, _) in self.plan_dirs()? {
            // A directory whose name is not a plan id is refused, as it always was.
            guards.push(self.lock_plan(&PlanId::parse(&name)?)?);
        }
        for (_, slot) in self.slots() {
            let sb = slot.lock().clone();
            if let Some(s) = sb {
                if matches!(
                    s.status(),
                    Status::Committed | Status::RolledBack | Status::Errored
                ) {
                    s.cleanup()?;
                    n += 1;
                }
            }
        }
        self.table.lock().retain(|_, slot| {
            slot.lock()
                .as_ref()
                .is_some_and(|s| !s.status().is_terminal())
        });
        let known: HashSet<String> = self
            .slots()
            .into_iter()
            .filter_map(|(_, s)| s.lock().as_ref().map(|s| s.sandbox_id().to_string()))
            .collect();
        for (_, plan_dir) in self.plan_dirs()? {
            for dir in subdirs(&plan_dir) {
                let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if ulid::Ulid::from_string(name).is_ok()
                    && !known.contains(name)
                    && !dir.join(STATE_FILE).exists()
                {
                    strategy::remove_dir(&dir).map_err(|e| {
                        SandboxError::from_lower(Some(name), "remove a half-made sandbox", e)
                    })?;
                    n += 1;
                }
            }
        }
        drop(guards);
        n += self.sweep_lowers(Scope::Stale)?;
        Ok(n)
    }
}

impl Drop for PlanManager {
    fn drop(&mut self) {
        if !self.cleanup_on_drop.load(Ordering::Relaxed) {
            return;
        }
        let made = std::mem::take(&mut *self.made.lock());
        for (_, slot) in self.slots() {
            let Some(s) = slot.lock().clone() else {
                continue;
            };
            if !made.contains(s.sandbox_id()) {
                continue;
            }
            clean_up_if_idle(s.as_ref());
        }
    }
}

/// Cleans `s` up unless it may hold work not committed yet: what a manager's drop (and the
/// Python manager's `close`) does to each sandbox. Kept: a pending sandbox (nothing made yet),
/// an active one with changes or whose diff fails (its work must not be lost to a cleanup),
/// and one already cleaned up. Errors are ignored: the sandbox stays for the next cleanup.
pub fn clean_up_if_idle(s: &dyn Sandbox) {
    let keep = match s.status() {
        Status::Active => s.diff().map(|d| !d.entries.is_empty()).unwrap_or(true),
        Status::Pending | Status::CleanedUp => true,
        _ => false,
    };
    if !keep {
        let _ = s.cleanup();
    }
}
