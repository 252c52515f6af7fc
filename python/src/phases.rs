//! `PhaseRunner`: a plan's Execute and Apply phases with the checkpoint hooks of the docs —
//! `pre_execute` before Execute, `post_execute` after it succeeds, `pre_apply` before Apply,
//! and rollback to the phase's checkpoint when it fails (the Rust `PhaseRunner`).
//!
//! Why: a plan executor gets the hooks without writing them (with no checkpoint manager they
//! are skipped, as the docs say). Invariants: the GIL is released around the phase, and taken
//! only to run the Python callable; an exception the callable raises is re-raised unchanged
//! after the rollback (with `restored`, the sandbox ids rolled back, set on it when Python
//! allows); a failed rollback or checkpoint raises `SandboxError` (`SandboxRollbackError`
//! when a rollback failed), a failed commit its plan error (`AtomicCommitError`), each with
//! `restored` and `rollback_failures` attributes.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;

use patchbox::plan::phases::{PhaseError, PhaseRunner as RsRunner};
use patchbox::plan::PlanManager;

use crate::checkpoint::CheckpointManager;
use crate::errors::{plan_err, SandboxError_, SandboxRollbackError};
use crate::plan::SandboxManager;
use crate::plan_model::commit_record;

/// Runs the phases of a manager's plans with checkpoint hooks.
#[pyclass(frozen, module = "patchbox._native")]
pub struct PhaseRunner {
    plans: Arc<PlanManager>,
    checkpoints: Option<Py<CheckpointManager>>,
}

/// The error of a failed phase whose cause was not a Python exception.
fn phase_err(py: Python<'_>, e: PhaseError) -> PyErr {
    let msg = e.to_string();
    let err = if !e.rollback_failures.is_empty() {
        SandboxRollbackError::new_err(msg)
    } else {
        match e.source {
            Some(src) => plan_err(*src),
            None => SandboxError_::new_err(msg),
        }
    };
    let v = err.value(py);
    let _ = v.setattr("restored", e.restored.clone());
    let _ = v.setattr("rollback_failures", e.rollback_failures.clone());
    let _ = v.setattr("phase", e.phase);
    err
}

#[pymethods]
impl PhaseRunner {
    /// A runner over `manager`'s plans; without `checkpoint_manager` the hooks are skipped.
    #[new]
    #[pyo3(signature = (manager, checkpoint_manager=None))]
    fn py_new(
        manager: &SandboxManager,
        checkpoint_manager: Option<Py<CheckpointManager>>,
    ) -> PyResult<PhaseRunner> {
        Ok(PhaseRunner {
            plans: manager.plan_manager()?,
            checkpoints: checkpoint_manager,
        })
    }

    /// Runs `phase()` as the Execute phase of `plan_id`: `pre_execute` checkpoints of its
    /// created and active sandboxes, the phase, `post_execute` checkpoints on success; when
    /// `phase` raises, every sandbox goes back to its `pre_execute` checkpoint and the
    /// exception propagates. Returns what `phase` returned.
    fn execute(&self, py: Python<'_>, plan_id: String, phase: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let raised: Mutex<Option<PyErr>> = Mutex::new(None);
        let cps = self.checkpoints.as_ref().map(|c| c.clone_ref(py));
        let out = py.detach(|| {
            let run = |cm: Option<&patchbox::plan::checkpoint::CheckpointManager>| {
                RsRunner::new(&self.plans, cm).execute(&plan_id, || {
                    Python::attach(|py| {
                        phase.call0(py).map_err(|e| {
                            let msg = e.to_string();
                            *raised.lock() = Some(e);
                            msg
                        })
                    })
                })
            };
            match &cps {
                Some(c) => c
                    .get()
                    .with_inner(|cm| cm.map_or_else(|| Err(()), |cm| Ok(run(Some(cm))))),
                None => Ok(run(None)),
            }
        });
        match out {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => match raised.lock().take() {
                Some(original) if e.rollback_failures.is_empty() => {
                    let _ = original.value(py).setattr("restored", e.restored);
                    Err(original)
                }
                Some(original) => {
                    let err = phase_err(py, e);
                    err.set_cause(py, Some(original));
                    Err(err)
                }
                None => Err(phase_err(py, e)),
            },
            Err(_) => Err(SandboxError_::new_err("the CheckpointManager is closed")),
        }
    }

    /// Runs the Apply phase of `plan_id`: a `pre_apply` checkpoint, then `commit_all`; on
    /// failure every sandbox goes back to `pre_apply` and the commit's error is raised.
    fn apply(&self, py: Python<'_>, plan_id: String) -> PyResult<Vec<Py<PyAny>>> {
        let cps = self.checkpoints.as_ref().map(|c| c.clone_ref(py));
        let out = py.detach(|| match &cps {
            Some(c) => c.get().with_inner(|cm| {
                cm.map_or_else(
                    || Err(()),
                    |cm| Ok(RsRunner::new(&self.plans, Some(cm)).apply(&plan_id)),
                )
            }),
            None => Ok(RsRunner::new(&self.plans, None).apply(&plan_id)),
        });
        match out {
            Ok(Ok(results)) => results.into_iter().map(|r| commit_record(py, r)).collect(),
            Ok(Err(e)) => Err(phase_err(py, e)),
            Err(()) => Err(SandboxError_::new_err("the CheckpointManager is closed")),
        }
    }
}
