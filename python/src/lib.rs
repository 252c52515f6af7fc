//! `patchbox._native`: the PyO3 bridge of patchbox, one small visible module per layer.
//!
//! The pure-Python package `patchbox` (python/patchbox/) re-exports what is defined here and
//! adds what reads best in Python (context managers, the registry of Python strategies).
//! Every call that can take time releases the GIL; every Rust error becomes one of the
//! exception classes of `patchbox.errors` (see [`errors`]), with the path in its message; no
//! Rust panic reaches Python (PyO3 turns one into `PanicException`, and library code does not
//! panic on input).
//!
//! Layout: [`errors`] (the conversions into the exception classes of `patchbox.errors`); the
//! plan layer and the session layer each get their own files, registered from [`_native`]
//! below.

use pyo3::prelude::*;

mod errors;
// plan layer
mod adapter;
mod boundary;
mod checkpoint;
mod custom;
mod phases;
mod plan;
mod plan_model;
mod plan_records;
mod sandbox;
mod sql;
mod strategies;
// session layer
mod apply;
mod convert;
mod delegation;
mod pending;
mod report;
mod review;
mod session;
mod sessions;
mod stored;

/// The compiled module: registers each layer's classes and functions.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // plan layer (plan.rs, sandbox.rs, checkpoint.rs, custom.rs, ...)
    register_plan(m)?;
    // session layer (session.rs, apply.rs)
    delegation::register(m)?;
    session::register(m)?;
    sessions::register(m)?;
    report::register(m)?;
    apply::register(m)?;
    pending::register(m)?;
    stored::register(m)?;
    review::register(m)?;
    Ok(())
}

/// Registers the plan layer's classes (each file's own).
fn register_plan(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<crate::plan_model::SandboxStatus>()?;
    m.add_class::<crate::plan_model::SandboxStrategy>()?;
    m.add_class::<crate::plan_model::SnapshotInfo>()?;
    m.add_class::<crate::plan_model::DiffEntry>()?;
    m.add_class::<crate::plan_model::SandboxDiff>()?;
    m.add_class::<crate::plan_model::DiffView>()?;
    m.add_class::<crate::boundary::Resource>()?;
    m.add_class::<crate::boundary::ResourceRegistry>()?;
    m.add_class::<sandbox::Sandbox>()?;
    crate::strategies::register(m)?;
    m.add_class::<plan::SandboxManager>()?;
    m.add_class::<crate::checkpoint::CheckpointManager>()?;
    m.add_class::<crate::custom::StrategyRegistry>()?;
    m.add_class::<crate::adapter::BuiltInSandboxStrategyAdapter>()?;
    m.add_class::<crate::phases::PhaseRunner>()?;
    crate::plan_records::register(m)?;
    // The protocol's operations, in order: the one list Python strategies are checked against.
    m.add(
        "STRATEGY_OPERATIONS",
        patchbox::plan::custom::OPERATIONS.to_vec(),
    )?;
    Ok(())
}
