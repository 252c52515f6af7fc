//! Phase hooks for plan executors: run a plan's Execute phase and its Apply phase with
//! checkpoints around them, and roll the plan's sandboxes back when a phase fails.
//!
//! ```
//! use patchbox::plan::checkpoint::CheckpointManager;
//! use patchbox::plan::phases::PhaseRunner;
//! use patchbox::plan::{PlanManager, Strategy};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = tempfile::tempdir()?;
//! let project = tempfile::tempdir()?;
//! std::fs::write(project.path().join("a.txt"), "one\n")?;
//! let plans = PlanManager::open(root.path())?;
//! let sb = plans.get_or_create_sandbox("p", "r", project.path(), Strategy::CopyOnWrite)?;
//! let checkpoints = CheckpointManager::new(root.path());
//! let runner = PhaseRunner::new(&plans, Some(&checkpoints));
//! // A failing Execute phase: its writes are rolled back.
//! let failed = runner.execute("p", || -> Result<(), String> {
//!     std::fs::write(sb.get_path("a.txt".as_ref()).unwrap(), "half done\n").unwrap();
//!     Err("the model gave up".into())
//! });
//! assert!(failed.is_err());
//! assert_eq!(std::fs::read_to_string(sb.get_path("a.txt".as_ref())?)?, "one\n");
//! // A successful one, then Apply.
//! runner.execute("p", || -> Result<(), String> {
//!     std::fs::write(sb.get_path("a.txt".as_ref()).unwrap(), "two\n").unwrap();
//!     Ok(())
//! })?;
//! runner.apply("p")?;
//! assert_eq!(std::fs::read_to_string(project.path().join("a.txt"))?, "two\n");
//! # Ok(()) }
//! ```
//!
//! Execute: a `pre_execute` checkpoint of every created or active sandbox of the plan (`none`
//! has none), the phase, then a `post_execute` checkpoint on success; on failure — an error,
//! or a panic, which is caught — every sandbox is rolled back to its `pre_execute`
//! checkpoint. Apply: a `pre_apply` checkpoint, then `commit_all` (atomic: a failure leaves
//! every original as it was); on failure — an error, or the failed result of a sandbox-level
//! failure — the sandboxes are rolled back to `pre_apply`. With
//! no checkpoint manager the hooks are skipped: the phase runs, and Apply is `commit_all`.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::checkpoint::{Checkpoint, CheckpointManager, Phase};
use super::error::SandboxError;
use super::manager::PlanManager;
use super::model::CommitResult;
use super::sandbox::{CheckpointSupport, Sandbox};
use super::status::Status;
use crate::id::{IntoId, PlanId};

/// A phase that failed, and what the hooks did about it.
#[derive(Debug)]
pub struct PhaseError {
    /// `execute` or `apply`.
    pub phase: &'static str,
    /// Why it failed (the phase's error, its panic message, or the commit's error).
    pub reason: String,
    /// Whether the phase panicked.
    pub panicked: bool,
    /// Sandboxes rolled back to their checkpoint.
    pub restored: Vec<String>,
    /// Sandboxes whose rollback failed, with why.
    pub rollback_failures: Vec<(String, String)>,
    /// The plan-layer error, when one caused the failure (a checkpoint or commit error).
    pub source: Option<Box<SandboxError>>,
}

impl fmt::Display for PhaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} phase failed: {}", self.phase, self.reason)?;
        if !self.restored.is_empty() {
            write!(f, " (rolled back: {})", self.restored.join(", "))?;
        }
        for (id, why) in &self.rollback_failures {
            write!(f, "; rollback of {id} failed: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PhaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

/// The checkpoints a phase took, per sandbox.
type Taken = Vec<(Arc<dyn Sandbox>, Checkpoint)>;

/// Runs the phases of plans with checkpoint hooks.
pub struct PhaseRunner<'a> {
    plans: &'a PlanManager,
    checkpoints: Option<&'a CheckpointManager>,
}

impl<'a> PhaseRunner<'a> {
    /// A runner over `plans`; without `checkpoints` the hooks are skipped.
    pub fn new(plans: &'a PlanManager, checkpoints: Option<&'a CheckpointManager>) -> Self {
        PhaseRunner { plans, checkpoints }
    }

    fn checkpointable(&self, plan_id: &PlanId) -> Vec<Arc<dyn Sandbox>> {
        self.plans
            .list_sandboxes(plan_id)
            .into_iter()
            .filter(|s| matches!(s.status(), Status::Created | Status::Active))
            .filter(|s| s.checkpoint_support() != CheckpointSupport::Unsupported)
            .collect()
    }

    fn checkpoint_all(
        &self,
        plan_id: &PlanId,
        phase: Phase,
        which: &'static str,
    ) -> Result<Taken, PhaseError> {
        let Some(cm) = self.checkpoints else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for s in self.checkpointable(plan_id) {
            let cp = cm
                .create_checkpoint(&s, plan_id, phase.name(), Default::default())
                .map_err(|e| {
                    failure(
                        which,
                        format!("checkpoint {}: {e}", phase.name()),
                        false,
                        Some(e),
                    )
                })?;
            out.push((s, cp));
        }
        Ok(out)
    }

    fn roll_back(&self, taken: &[(Arc<dyn Sandbox>, Checkpoint)], err: &mut PhaseError) {
        let Some(cm) = self.checkpoints else { return };
        for (s, cp) in taken.iter().rev() {
            match cm.rollback_to(cp) {
                Ok(_) => err.restored.push(s.sandbox_id().to_string()),
                Err(e) => err
                    .rollback_failures
                    .push((s.sandbox_id().to_string(), e.to_string())),
            }
        }
    }

    /// Runs the Execute phase `phase` of `plan_id` (see the module docs). A `plan_id` that
    /// is not a [`PlanId`] is refused before the phase runs.
    pub fn execute<T, E: fmt::Display>(
        &self,
        plan_id: impl IntoId<PlanId>,
        phase: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, PhaseError> {
        let plan_id = &parse("execute", plan_id)?;
        let taken = self.checkpoint_all(plan_id, Phase::PreExecute, "execute")?;
        let outcome = catch_unwind(AssertUnwindSafe(phase));
        let mut err = match outcome {
            Ok(Ok(v)) => {
                self.checkpoint_all(plan_id, Phase::PostExecute, "execute")?;
                return Ok(v);
            }
            Ok(Err(e)) => failure("execute", e.to_string(), false, None),
            Err(panic) => failure("execute", panic_message(&panic), true, None),
        };
        self.roll_back(&taken, &mut err);
        Err(err)
    }

    /// Runs the Apply phase of `plan_id`: `commit_all` between a `pre_apply` checkpoint and,
    /// on failure, the rollback to it.
    pub fn apply(&self, plan_id: impl IntoId<PlanId>) -> Result<Vec<CommitResult>, PhaseError> {
        let plan_id = &parse("apply", plan_id)?;
        let taken = self.checkpoint_all(plan_id, Phase::PreApply, "apply")?;
        match catch_unwind(AssertUnwindSafe(|| self.plans.commit_all(plan_id))) {
            Ok(Ok(r)) => match r.iter().find(|r| !r.success) {
                // `commit_all`'s sandbox-level failure (it rolled the plan back already):
                // the phase failed, as a commit error of that sandbox.
                Some(failed) => {
                    let reason = failed.error.clone().unwrap_or_default();
                    let e = SandboxError::Commit {
                        sandbox_id: failed.sandbox_id.clone(),
                        reason: reason.clone(),
                        files: Vec::new(),
                        source: None,
                    };
                    let mut err = failure("apply", reason, false, Some(e));
                    self.roll_back(&taken, &mut err);
                    Err(err)
                }
                None => Ok(r),
            },
            Ok(Err(e)) => {
                let mut err = failure("apply", e.to_string(), false, Some(e));
                self.roll_back(&taken, &mut err);
                Err(err)
            }
            Err(panic) => {
                let mut err = failure("apply", panic_message(&panic), true, None);
                self.roll_back(&taken, &mut err);
                Err(err)
            }
        }
    }
}

/// `plan_id` as a [`PlanId`], or the failure of `phase` saying why it is not one.
fn parse(phase: &'static str, plan_id: impl IntoId<PlanId>) -> Result<PlanId, PhaseError> {
    plan_id.into_id().map_err(|e| {
        let e = SandboxError::from(e);
        failure(phase, e.to_string(), false, Some(e))
    })
}

fn failure(
    phase: &'static str,
    reason: String,
    panicked: bool,
    source: Option<SandboxError>,
) -> PhaseError {
    PhaseError {
        phase,
        reason,
        panicked,
        restored: Vec::new(),
        rollback_failures: Vec::new(),
        source: source.map(Box::new),
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}
