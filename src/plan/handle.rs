//! [`SandboxHandle`]: the one implementation of [`Sandbox`]. It owns the strategy's
//! [`Backend`] and answers what is the same for every strategy — the sandbox's id, strategy
//! name, status, context and home (all from the backend's lifecycle), the lifecycle part of
//! `check_commit`, and the checkpoint and SQL capabilities — so that a strategy writes only
//! what it does differently.

use std::path::{Path, PathBuf};

use super::backend::{Backend, Checkpoints};
use super::batch::CommitBatch;
use super::error::SandboxError;
use super::model::{CommitResult, DiffEntry, SandboxContext, SandboxDiff, Strategy};
use super::record::Lifecycle;
use super::sandbox::{CheckpointSupport, Sandbox};
use super::status::Status;
use super::strategy::sqlite::access::SqlAccess;
use crate::id::{PlanId, SandboxId};

/// A sandbox: the lifecycle every strategy shares, over one strategy's [`Backend`].
pub struct SandboxHandle {
    backend: Box<dyn Backend>,
}

impl SandboxHandle {
    /// The handle of `backend`.
    pub fn new(backend: Box<dyn Backend>) -> SandboxHandle {
        SandboxHandle { backend }
    }

    fn lc(&self) -> &Lifecycle {
        self.backend.lifecycle()
    }
}

impl Sandbox for SandboxHandle {
    fn sandbox_id(&self) -> &str {
        self.lc().id().as_str()
    }

    fn id(&self) -> &SandboxId {
        self.lc().id()
    }

    fn strategy(&self) -> Strategy {
        self.lc().strategy()
    }

    fn status(&self) -> Status {
        self.lc().status()
    }

    fn context(&self) -> Option<SandboxContext> {
        self.lc().context()
    }

    fn home(&self) -> &Path {
        self.lc().dir()
    }

    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        self.backend.create(plan_id)
    }

    fn get_path(&self, rel: &Path) -> Result<PathBuf, SandboxError> {
        self.backend.get_path(rel)
    }

    fn read(&self, rel: &Path) -> Result<Option<Vec<u8>>, SandboxError> {
        self.backend.read(rel)
    }

    fn write(&self, rel: &Path, data: &[u8]) -> Result<(), SandboxError> {
        self.backend.write(rel, data)
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        self.backend.diff()
    }

    fn changes(&self) -> Result<Vec<DiffEntry>, SandboxError> {
        self.backend.changes()
    }

    /// The lifecycle step a commit would take is checked here, once for every strategy;
    /// then the backend checks what it alone knows (conflicts, an open transaction).
    fn check_commit(&self) -> Result<(), SandboxError> {
        let from = self.lc().status();
        let to = if from == Status::Created {
            Status::Active
        } else {
            Status::Committed
        };
        self.lc().check(from, to)?;
        self.backend.check_commit()
    }

    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError> {
        self.backend.commit(message)
    }

    fn commit_batched(
        &self,
        message: Option<&str>,
        batch: &mut CommitBatch,
    ) -> Result<CommitResult, SandboxError> {
        self.backend.commit_batched(message, batch)
    }

    fn settle_in_flight(&self) -> Result<(), SandboxError> {
        self.backend.settle_in_flight()
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        self.backend.rollback()
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        self.backend.cleanup()
    }

    fn is_rollbackable(&self) -> bool {
        self.backend.is_rollbackable()
    }

    fn checkpoint_support(&self) -> CheckpointSupport {
        match self.backend.checkpoints() {
            Checkpoints::Files => CheckpointSupport::Files,
            Checkpoints::Native(_) => CheckpointSupport::Native,
            Checkpoints::None => CheckpointSupport::Unsupported,
        }
    }

    fn checkpoints(&self) -> Checkpoints<'_> {
        self.backend.checkpoints()
    }

    fn sql(&self) -> Option<&dyn SqlAccess> {
        self.backend.sql()
    }
}
