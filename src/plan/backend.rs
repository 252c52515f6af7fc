//! The narrow interface a strategy implements: [`Backend`], what makes, diffs, commits, rolls
//! back and removes one sandbox's environment, plus the capabilities a backend MAY offer
//! (native checkpoints, a SQL connection). The sandbox's identity, status and context are
//! not the backend's business: the [`SandboxHandle`](super::handle::SandboxHandle) reads
//! them from the backend's [`Lifecycle`] once for every strategy.

use std::path::{Path, PathBuf};

use super::batch::CommitBatch;
use super::error::SandboxError;
use super::model::{CommitResult, DiffEntry, SandboxContext, SandboxDiff};
use super::record::Lifecycle;
use super::strategy::{self, sqlite::access::SqlAccess};
use crate::id::PlanId;

/// One strategy's sandbox environment.
///
/// Required: [`Backend::lifecycle`], [`Backend::create`], [`Backend::diff`],
/// [`Backend::commit`], [`Backend::rollback`], [`Backend::cleanup`]. Each step runs under the
/// lifecycle's lock and moves the status through [`Lifecycle::advance`], so a refused step
/// changes nothing. The rest have defaults that
/// fit a backend whose files are under its sandbox path and which checkpoints by its files.
pub trait Backend: Send + Sync {
    /// The lifecycle guard (id, strategy, status, record, lock) this backend runs under.
    fn lifecycle(&self) -> &Lifecycle;

    /// Makes the sandbox environment (`Pending → Created`); on failure nothing of it is left
    /// and the error is [`SandboxError::Creation`].
    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError>;

    /// Where `resource_relative` lives in the sandbox; makes a created sandbox active.
    /// Default: below the record's sandbox path, refusing absolute paths, `..` and a path
    /// that leads through a symlink out of the sandbox.
    fn get_path(&self, resource_relative: &Path) -> Result<PathBuf, SandboxError> {
        let lc = self.lifecycle();
        let mut st = lc.lock_for_path()?;
        strategy::activate_for_path(lc, &mut st)?;
        strategy::sandbox_path_of(lc, &st, resource_relative)
    }

    /// The content of `resource_relative`; `None` when it does not exist. Default: read
    /// through [`Backend::get_path`].
    fn read(&self, resource_relative: &Path) -> Result<Option<Vec<u8>>, SandboxError> {
        let p = self.get_path(resource_relative)?;
        match std::fs::read(&p) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SandboxError::from_lower(
                Some(self.lifecycle().id().as_str()),
                "read",
                crate::Error::io("read", &p, e),
            )),
        }
    }

    /// Sets the content of `resource_relative` (making its parent directories). Default:
    /// through [`Backend::get_path`].
    fn write(&self, resource_relative: &Path, data: &[u8]) -> Result<(), SandboxError> {
        let p = self.get_path(resource_relative)?;
        let id = self.lifecycle().id().as_str();
        let io = |what: &'static str, e: std::io::Error| {
            SandboxError::from_lower(Some(id), what, crate::Error::io(what, &p, e))
        };
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("create directory", e))?;
        }
        std::fs::write(&p, data).map_err(|e| io("write", e))
    }

    /// The changes against what the sandbox was made from (per file, and as a patch).
    fn diff(&self) -> Result<SandboxDiff, SandboxError>;

    /// The per-file entries of [`Backend::diff`] without the patch.
    fn changes(&self) -> Result<Vec<DiffEntry>, SandboxError> {
        self.diff().map(|d| d.entries)
    }

    /// What a commit would meet beyond the lifecycle (which the handle has checked): the
    /// changes apply to the original as it is. Default: nothing more to check.
    fn check_commit(&self) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Brings the changes into the original (`Active → Committed`).
    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError>;

    /// [`Backend::commit`] inside `commit_all`, which may leave the last sync to `batch`.
    fn commit_batched(
        &self,
        message: Option<&str>,
        batch: &mut CommitBatch,
    ) -> Result<CommitResult, SandboxError> {
        let _ = batch;
        self.commit(message)
    }

    /// Settles a commit left in flight by a panic (see
    /// [`Sandbox::settle_in_flight`](super::sandbox::Sandbox::settle_in_flight)).
    fn settle_in_flight(&self) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Discards the changes (from `Active`) or undoes the commit (from `Committed`).
    fn rollback(&self) -> Result<(), SandboxError>;

    /// Removes every artefact (`→ CleanedUp`); idempotent.
    fn cleanup(&self) -> Result<(), SandboxError>;

    /// Whether a commit can be undone. Default: what the strategy says.
    fn is_rollbackable(&self) -> bool {
        self.lifecycle().strategy().is_rollbackable()
    }

    /// How this backend is checkpointed. Default: by its files.
    fn checkpoints(&self) -> Checkpoints<'_> {
        Checkpoints::Files
    }

    /// Its SQL connection, when it is a database's sandbox. Default: none.
    fn sql(&self) -> Option<&dyn SqlAccess> {
        None
    }
}

/// How a backend is checkpointed: a capability it may offer rather than methods every
/// strategy stubs.
pub enum Checkpoints<'a> {
    /// By its files: its diff against base, content-addressed.
    Files,
    /// By the backend itself (savepoints, refs).
    Native(&'a dyn NativeCheckpoints),
    /// Not at all (`none`: its writes went to the original).
    None,
}

/// Checkpoints a backend keeps itself.
pub trait NativeCheckpoints {
    /// Saves the checkpoint `id`.
    fn save(&self, id: &str) -> Result<(), SandboxError>;

    /// Restores the checkpoint `id`.
    fn restore(&self, id: &str) -> Result<(), SandboxError>;

    /// Forgets the checkpoint `id` (the sandbox keeps its state). Default: nothing to do.
    fn release(&self, id: &str) -> Result<(), SandboxError> {
        let _ = id;
        Ok(())
    }
}
