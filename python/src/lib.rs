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
    // plan layer (plan.rs, checkpoint.rs, custom.rs)
    plan::register(m)?;
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
