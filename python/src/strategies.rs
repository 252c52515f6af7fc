//! One Python class per built-in strategy — `NoSandbox`, `CopyOnWriteSandbox`,
//! `OverlaySandbox`, `GitWorktreeSandbox`, `TransactionSandbox` — and `CustomSandbox` for a
//! registered strategy's sandboxes, each a subclass of the native `Sandbox`.
//!
//! Why: the plan executors' documentation names a class per strategy, and users write
//! `isinstance(sb, CopyOnWriteSandbox)`. Invariant: the classes add no state and no
//! behaviour (the Rust strategy behind `Sandbox.inner` is the behaviour); the manager makes
//! every sandbox object through [`new_object`], so a sandbox's class always matches its
//! strategy.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::PyClassInitializer;

use patchbox::plan::{PlanManager, Sandbox as RsSandbox, Strategy};

use crate::plan::Sandbox;

/// A sandbox of the `none` strategy: writes go to the original; nothing to roll back.
#[pyclass(frozen, extends = Sandbox, module = "patchbox._native")]
pub struct NoSandbox;

/// A sandbox of the `copy_on_write` strategy: a copy of the resource's tree.
#[pyclass(frozen, extends = Sandbox, module = "patchbox._native")]
pub struct CopyOnWriteSandbox;

/// A sandbox of the `overlay` strategy: an overlay over the resource (a copy where the
/// kernel refuses the mount).
#[pyclass(frozen, extends = Sandbox, module = "patchbox._native")]
pub struct OverlaySandbox;

/// A sandbox of the `git_worktree` strategy: a worktree on a branch of its own.
#[pyclass(frozen, extends = Sandbox, module = "patchbox._native")]
pub struct GitWorktreeSandbox;

/// A sandbox of the `transaction_rollback` strategy: a transaction on a SQLite database.
#[pyclass(frozen, extends = Sandbox, module = "patchbox._native")]
pub struct TransactionSandbox;

/// A sandbox of a registered custom strategy (its `strategy` is the registered name).
#[pyclass(frozen, extends = Sandbox, module = "patchbox._native")]
pub struct CustomSandbox;

/// The Python object of `inner`, of its strategy's class.
pub(crate) fn new_object(
    py: Python<'_>,
    inner: Arc<dyn RsSandbox>,
    owner: Option<Arc<PlanManager>>,
) -> PyResult<Py<Sandbox>> {
    let strategy = inner.strategy();
    let base = PyClassInitializer::from(Sandbox::new(inner, owner));
    let obj: Py<PyAny> = match strategy {
        Strategy::None => Py::new(py, base.add_subclass(NoSandbox))?.into_any(),
        Strategy::CopyOnWrite => Py::new(py, base.add_subclass(CopyOnWriteSandbox))?.into_any(),
        Strategy::Overlay => Py::new(py, base.add_subclass(OverlaySandbox))?.into_any(),
        Strategy::GitWorktree => Py::new(py, base.add_subclass(GitWorktreeSandbox))?.into_any(),
        Strategy::TransactionRollback => {
            Py::new(py, base.add_subclass(TransactionSandbox))?.into_any()
        }
        _ => Py::new(py, base.add_subclass(CustomSandbox))?.into_any(),
    };
    Ok(obj.into_bound(py).cast_into::<Sandbox>()?.unbind())
}

/// Registers the classes (called from `plan.rs`).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NoSandbox>()?;
    m.add_class::<CopyOnWriteSandbox>()?;
    m.add_class::<OverlaySandbox>()?;
    m.add_class::<GitWorktreeSandbox>()?;
    m.add_class::<TransactionSandbox>()?;
    m.add_class::<CustomSandbox>()?;
    Ok(())
}
