//! The face of one resource's sandbox: [`Sandbox`], what the manager, the checkpoints and
//! the bridges hold (`Arc<dyn Sandbox>`). It is implemented once, by
//! [`SandboxHandle`](super::handle::SandboxHandle), over a strategy's
//! [`Backend`](super::backend::Backend).

use std::path::{Path, PathBuf};

use super::backend::Checkpoints;
use super::error::SandboxError;
use super::model::{CommitResult, SandboxContext, SandboxDiff, Strategy};
use super::status::Status;
use super::strategy::sqlite::access::SqlAccess;
use crate::id::{PlanId, SandboxId};

/// One resource's sandbox in one plan.
///
/// Every method checks the step against the lifecycle ([`Status::can_transition`]) first: a
/// refused step is a [`SandboxError::State`] and changes nothing. Methods take `&self` (a
/// sandbox is shared between threads as `Arc<dyn Sandbox>`); each serializes its own
/// operations. The sandbox's state is on disk under the manager's root, so a manager opened
/// after a crash finds it again.
pub trait Sandbox: Send + Sync {
    /// Its ULID, as text (what the bridges and messages show).
    fn sandbox_id(&self) -> &str;

    /// Its ULID, as the type an operation that needs a sandbox id takes.
    fn id(&self) -> &SandboxId;

    /// The strategy it implements.
    fn strategy(&self) -> Strategy;

    /// Its status now.
    fn status(&self) -> Status;

    /// Its context; `None` before [`Sandbox::create`].
    fn context(&self) -> Option<SandboxContext>;

    /// Makes the sandbox environment (`Pending → Created`). On failure nothing of it is
    /// left on disk and the error is [`SandboxError::Creation`]. The bridges parse the plan
    /// id they are given into a [`PlanId`] before they call it.
    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError>;

    /// Where `resource_relative` lives in the sandbox. Refuses absolute paths, `..`, and a
    /// path that leads through a symlink out of the sandbox. Makes a created sandbox active.
    fn get_path(&self, resource_relative: &Path) -> Result<PathBuf, SandboxError>;

    /// The content of `resource_relative` in the sandbox; `None` when it does not exist
    /// there. A sandbox with files reads
    /// through [`Sandbox::get_path`] (so a created sandbox becomes active); a custom
    /// strategy's sandbox asks its strategy.
    fn read(&self, resource_relative: &Path) -> Result<Option<Vec<u8>>, SandboxError>;

    /// Sets the content of `resource_relative` in the sandbox (making its parent
    /// directories). A sandbox with files writes through [`Sandbox::get_path`]; a custom
    /// strategy's sandbox asks its strategy.
    fn write(&self, resource_relative: &Path, data: &[u8]) -> Result<(), SandboxError>;

    /// The sandbox's changes against what it was made from (per file, and as a patch).
    fn diff(&self) -> Result<SandboxDiff, SandboxError>;

    /// The per-file entries of [`Sandbox::diff`] without the patch: what a review or a
    /// checkpoint needs, without the line diffs (strategies override it when cheaper).
    fn changes(&self) -> Result<Vec<super::model::DiffEntry>, SandboxError>;

    /// Checks, without writing anything, that [`Sandbox::commit`] would succeed now: the
    /// changes apply to the original as it is. `commit_all` calls it on every sandbox of a
    /// plan before the first write. [`SandboxError::Commit`] names the conflicting files.
    fn check_commit(&self) -> Result<(), SandboxError>;

    /// Brings the sandbox's changes into the original (`Active → Committed`).
    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError>;

    /// [`Sandbox::commit`] inside `commit_all`: a strategy writing through the atomic apply
    /// may leave the apply's last sync and cleanup to `batch`, which `commit_all` finishes
    /// (one sync per filesystem) before it returns. A backend without a batch commits at once.
    #[doc(hidden)]
    fn commit_batched(
        &self,
        message: Option<&str>,
        batch: &mut crate::plan::batch::CommitBatch,
    ) -> Result<CommitResult, SandboxError>;

    /// Settles a commit this sandbox left in flight without finishing it: a panic inside
    /// its commit, after the change may have reached the original but before the status
    /// said so. Afterwards the status is the truth (`Committed` when the change landed), so
    /// a rollback undoes a landed change instead of passing it by. `commit_all` calls it
    /// before its LIFO rollback; a no-op when nothing is in flight, as it is for
    /// strategies that cannot tell (they settle such a commit when reopened).
    #[doc(hidden)]
    fn settle_in_flight(&self) -> Result<(), SandboxError>;

    /// From `Active`: discards the sandbox's changes (its files are the original's again).
    /// From `Committed`: undoes the commit in the original (refused, naming the files, when
    /// the user changed them since); the sandbox keeps its changes, so it may commit again.
    fn rollback(&self) -> Result<(), SandboxError>;

    /// Removes every artefact (`→ CleanedUp`); an active sandbox's changes are discarded
    /// first. Idempotent: cleaning a cleaned-up sandbox does nothing.
    fn cleanup(&self) -> Result<(), SandboxError>;

    /// Whether a commit can be undone. `commit_all` commits the others last.
    fn is_rollbackable(&self) -> bool;

    /// The sandbox's own directory under its plan's directory (where its `state.json` is):
    /// a checkpoint manager over another root takes the lock of the plan this directory is
    /// in, so its checkpoints serialize with the plan's operations.
    fn home(&self) -> &Path;

    /// How [`crate::plan::checkpoint::CheckpointManager`] checkpoints this sandbox: by its
    /// files (its diff against base, deduplicated), natively (a database's savepoints), or
    /// not at all (`none`).
    fn checkpoint_support(&self) -> CheckpointSupport;

    /// How it is checkpointed, with the backend's native checkpoints when it has them.
    fn checkpoints(&self) -> Checkpoints<'_>;

    /// Its SQL connection (statements, savepoints) when it is a database's sandbox
    /// (`transaction_rollback`); `None` for every other strategy.
    fn sql(&self) -> Option<&dyn SqlAccess>;
}

/// How a sandbox can be checkpointed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointSupport {
    /// By its files: what changed against the base, content-addressed.
    Files,
    /// By the sandbox itself (savepoints of a database transaction).
    Native,
    /// Not at all (`none`: its writes went to the original).
    Unsupported,
}
