//! [`BuiltInAdapter`]: a built-in strategy presented through the [`StrategyProtocol`], so code
//! written against the protocol drives `copy_on_write`, `overlay`, `git_worktree` or `none`
//! the same way as a custom strategy.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::protocol::{DiffView, OpResult, SandboxRef, StrategyFailure, StrategyProtocol};
use crate::plan::checkpoint::{Checkpoint, CheckpointManager};
use crate::plan::error::SandboxError;
use crate::plan::manager::PlanManager;
use crate::plan::model::Strategy;
use crate::plan::sandbox::Sandbox;
use crate::plan::status::Status;

/// A built-in strategy behind the protocol. Its sandboxes live in a [`PlanManager`] of its own
/// (over the root given to [`BuiltInAdapter::new`]; give it a directory no other manager
/// uses): `read`/`write` go through their `get_path`, checkpoints through a
/// [`CheckpointManager`]. Metadata key `builtin.sandbox_id` names the built-in sandbox.
pub struct BuiltInAdapter {
    strategy: Strategy,
    plans: PlanManager,
    checkpoints: CheckpointManager,
    /// The library's sandbox id → the built-in sandbox.
    sandboxes: Mutex<HashMap<String, Arc<dyn Sandbox>>>,
    /// (sandbox id, checkpoint id) → the checkpoint.
    taken: Mutex<HashMap<(String, String), Checkpoint>>,
}

fn failure(e: SandboxError) -> StrategyFailure {
    StrategyFailure::new(e.to_string())
}

impl BuiltInAdapter {
    /// The adapter of `strategy` (a built-in one) with its sandboxes under `root`.
    pub fn new(root: impl AsRef<Path>, strategy: Strategy) -> Result<BuiltInAdapter, SandboxError> {
        if strategy.is_custom() {
            return Err(SandboxError::sandbox(
                None,
                format!("BuiltInAdapter adapts built-in strategies, not {strategy}"),
            ));
        }
        let plans = PlanManager::open(root.as_ref())?;
        let checkpoints = CheckpointManager::new(plans.root());
        Ok(BuiltInAdapter {
            strategy,
            plans,
            checkpoints,
            sandboxes: Mutex::new(HashMap::new()),
            taken: Mutex::new(HashMap::new()),
        })
    }

    /// The built-in strategy adapted.
    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    fn sandbox(&self, r: &SandboxRef) -> OpResult<Arc<dyn Sandbox>> {
        self.sandboxes
            .lock()
            .get(&r.sandbox_id)
            .cloned()
            .ok_or_else(|| StrategyFailure::new(format!("no sandbox {} here", r.sandbox_id)))
    }
}

impl StrategyProtocol for BuiltInAdapter {
    fn create(&self, r: &SandboxRef, original: &Path) -> OpResult<BTreeMap<String, String>> {
        let sb = self
            .plans
            .get_or_create_sandbox(&r.plan_id, &r.resource_id, original, self.strategy.clone())
            .map_err(failure)?;
        let mut meta = BTreeMap::new();
        meta.insert(
            "builtin.sandbox_id".to_string(),
            sb.sandbox_id().to_string(),
        );
        meta.insert(
            "builtin.strategy".to_string(),
            self.strategy.name().to_string(),
        );
        self.sandboxes.lock().insert(r.sandbox_id.clone(), sb);
        Ok(meta)
    }

    fn read(&self, r: &SandboxRef, path: &str) -> OpResult<Option<Vec<u8>>> {
        self.sandbox(r)?.read(Path::new(path)).map_err(failure)
    }

    fn write(&self, r: &SandboxRef, path: &str, data: &[u8]) -> OpResult<()> {
        self.sandbox(r)?
            .write(Path::new(path), data)
            .map_err(failure)
    }

    fn diff(&self, r: &SandboxRef) -> OpResult<DiffView> {
        let d = self.sandbox(r)?.diff().map_err(failure)?;
        Ok(DiffView::new(&r.sandbox_id, d.entries))
    }

    fn commit(&self, r: &SandboxRef, message: Option<&str>) -> OpResult<Option<String>> {
        let res = self.sandbox(r)?.commit(message).map_err(failure)?;
        Ok(res.commit_ref)
    }

    fn rollback(&self, r: &SandboxRef, after_commit: bool) -> OpResult<()> {
        let sb = self.sandbox(r)?;
        sb.rollback().map_err(failure)?;
        if after_commit && sb.status() == Status::RolledBack {
            // The sandbox keeps its changes and is active again (as commit_all leaves it).
            sb.get_path(Path::new("")).map_err(failure)?;
        }
        Ok(())
    }

    fn checkpoint(&self, r: &SandboxRef, checkpoint_id: &str) -> OpResult<()> {
        let sb = self.sandbox(r)?;
        let cp = self
            .checkpoints
            .create_checkpoint(&sb, &r.plan_id, checkpoint_id, BTreeMap::new())
            .map_err(failure)?;
        self.taken
            .lock()
            .insert((r.sandbox_id.clone(), checkpoint_id.to_string()), cp);
        Ok(())
    }

    fn restore_checkpoint(&self, r: &SandboxRef, checkpoint_id: &str) -> OpResult<()> {
        let cp = self
            .taken
            .lock()
            .get(&(r.sandbox_id.clone(), checkpoint_id.to_string()))
            .cloned()
            .ok_or_else(|| StrategyFailure::new(format!("no checkpoint {checkpoint_id}")))?;
        match self.checkpoints.rollback_to(&cp).map_err(failure)? {
            true => Ok(()),
            false => Err(StrategyFailure::new(format!(
                "checkpoint {checkpoint_id} no longer exists"
            ))),
        }
    }

    fn cleanup(&self, r: &SandboxRef) -> OpResult<()> {
        let sb = self.sandboxes.lock().remove(&r.sandbox_id);
        self.taken.lock().retain(|(id, _), _| id != &r.sandbox_id);
        match sb {
            Some(sb) => sb.cleanup().map_err(failure),
            None => Ok(()),
        }
    }

    fn is_rollbackable(&self) -> bool {
        self.strategy.is_rollbackable()
    }
}
