//! Custom strategies written in Python, driven by the Rust plan manager.
//!
//! `StrategyRegistry` is the Rust registry behind a Python class (subclassed by the
//! pure-Python `patchbox.custom.SandboxStrategyRegistry`, which imports, checks prefixes and
//! validates the nine methods). What it registers is a factory of *drivers*: Python objects
//! with the nine operations in the Rust protocol's shape (see `patchbox/custom.py`, which
//! adapts the users' protocol to it). [`PyStrategy`] is the Rust `StrategyProtocol` over one
//! driver: each operation takes the GIL, calls the driver, and turns a Python exception into
//! a `StrategyFailure` whose text is the exception's (`ValueError: disk full`); the library
//! then raises the error of the step (a failed commit is `SandboxCommitError`). In
//! `commit_all`, an exception of the `SandboxError` family is a sandbox-level failure (the
//! plan is rolled back and the failed result returned); any other is unexpected
//! (`AtomicCommitError`).
//!
//! Invariants: no Python exception or Rust panic escapes an operation as anything but a
//! failure; a factory that raises yields a strategy whose every operation fails with that
//! error (the sandbox's creation then fails cleanly).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use patchbox::plan::custom::{
    DiffView, OpResult, RegistryError, SandboxRef as RsRef, StrategyFailure, StrategyProtocol,
    StrategyRegistry as RsRegistry,
};
use patchbox::plan::{DiffEntry, DiffOp};

use crate::errors::{ProtocolMismatchError, SandboxError_};
use crate::plan_model::{meta_of, path_str, ref_record};

/// A registry error as the Python class users catch: a missing operation is
/// `ProtocolMismatchError`, anything else `SandboxError`.
pub(crate) fn registry_err(e: RegistryError) -> PyErr {
    match e {
        RegistryError::ProtocolMismatch { .. } => ProtocolMismatchError::new_err(e.to_string()),
        other => SandboxError_::new_err(other.to_string()),
    }
}

/// The registry of custom strategies a `SandboxManager` makes sandboxes of.
#[pyclass(subclass, frozen, module = "patchbox._native")]
pub struct StrategyRegistry {
    pub(crate) inner: Arc<RsRegistry>,
}

#[pymethods]
impl StrategyRegistry {
    /// An empty registry (the arguments are the subclass's, for its `__init__`).
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        StrategyRegistry {
            inner: Arc::new(RsRegistry::new()),
        }
    }

    /// Registers `name`: `factory()` makes the driver of each new or reopened sandbox. A
    /// built-in's name or a taken one raises `SandboxError`.
    fn _register_driver(&self, name: &str, factory: Py<PyAny>) -> PyResult<()> {
        let factory = Arc::new(factory);
        self.inner
            .register_factory(
                name,
                Arc::new(move || -> Arc<dyn StrategyProtocol> {
                    let made = Python::attach(|py| factory.call0(py));
                    Arc::new(match made {
                        Ok(driver) => PyStrategy { driver: Ok(driver) },
                        Err(e) => PyStrategy {
                            driver: Err(format!("the strategy could not be made: {e}")),
                        },
                    })
                }),
            )
            .map_err(registry_err)
    }

    /// Whether a strategy is registered under `name`.
    fn has_custom_strategy(&self, name: &str) -> bool {
        self.inner.has_custom_strategy(name)
    }

    /// The registered names, sorted.
    fn names(&self) -> Vec<String> {
        self.inner.names()
    }
}

/// The Rust protocol over one Python driver.
struct PyStrategy {
    driver: Result<Py<PyAny>, String>,
}

impl PyStrategy {
    /// Calls `op` on the driver with the GIL; `out` converts its result.
    fn call<T>(
        &self,
        op: &str,
        args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>>,
        out: impl for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
    ) -> OpResult<T> {
        let driver = self
            .driver
            .as_ref()
            .map_err(|e| StrategyFailure::new(e.clone()))?;
        Python::attach(|py| {
            let r = args(py)
                .and_then(|a| driver.bind(py).call_method1(op, a))
                .and_then(|v| out(&v));
            // A patchbox `SandboxError` is the strategy's own, anticipated failure; any other
            // exception is unexpected (`commit_all` raises for it).
            r.map_err(|e| {
                let text = format!("{op}: {e}");
                if e.is_instance_of::<SandboxError_>(py) {
                    StrategyFailure::new(text)
                } else {
                    StrategyFailure::unexpected(text)
                }
            })
        })
    }
}

fn sref<'py>(py: Python<'py>, r: &RsRef) -> PyResult<Bound<'py, PyAny>> {
    ref_record(py, r)
}

fn entry_of(e: &Bound<'_, PyAny>) -> PyResult<DiffEntry> {
    let path: String = e.getattr("path")?.extract()?;
    let op_obj = e.getattr("operation")?;
    // A str, or an enum whose value is the name.
    let op_name: String = match op_obj.extract() {
        Ok(s) => s,
        Err(_) => op_obj.getattr("value")?.extract()?,
    };
    let operation = DiffOp::from_name(&op_name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "diff entry {path:?}: operation {op_name:?} is not added, modified or deleted"
        ))
    })?;
    let content = |name: &str| -> PyResult<Option<Vec<u8>>> {
        let v = e.getattr(name)?;
        if v.is_none() {
            Ok(None)
        } else if let Ok(b) = v.cast::<PyBytes>() {
            Ok(Some(b.as_bytes().to_vec()))
        } else {
            v.extract().map(Some)
        }
    };
    let mode = |name: &str| -> Option<u32> {
        e.getattr(name)
            .ok()
            .and_then(|v| v.extract::<Option<u32>>().ok())
            .flatten()
    };
    Ok(DiffEntry {
        before: content("before")?,
        after: content("after")?,
        before_mode: mode("before_mode"),
        after_mode: mode("after_mode"),
        path,
        operation,
    })
}

impl StrategyProtocol for PyStrategy {
    fn create(&self, sandbox: &RsRef, original: &Path) -> OpResult<BTreeMap<String, String>> {
        let orig = path_str(original);
        self.call(
            "create",
            |py| PyTuple::new(py, [sref(py, sandbox)?, orig.into_pyobject(py)?.into_any()]),
            |v| {
                if v.is_none() {
                    Ok(BTreeMap::new())
                } else {
                    meta_of(v)
                }
            },
        )
    }

    fn read(&self, sandbox: &RsRef, path: &str) -> OpResult<Option<Vec<u8>>> {
        self.call(
            "read",
            |py| PyTuple::new(py, [sref(py, sandbox)?, path.into_pyobject(py)?.into_any()]),
            |v| {
                if v.is_none() {
                    Ok(None)
                } else if let Ok(b) = v.cast::<PyBytes>() {
                    Ok(Some(b.as_bytes().to_vec()))
                } else {
                    v.extract().map(Some)
                }
            },
        )
    }

    fn write(&self, sandbox: &RsRef, path: &str, data: &[u8]) -> OpResult<()> {
        self.call(
            "write",
            |py| {
                PyTuple::new(
                    py,
                    [
                        sref(py, sandbox)?,
                        path.into_pyobject(py)?.into_any(),
                        PyBytes::new(py, data).into_any(),
                    ],
                )
            },
            |_| Ok(()),
        )
    }

    fn diff(&self, sandbox: &RsRef) -> OpResult<DiffView> {
        self.call(
            "diff",
            |py| PyTuple::new(py, [sref(py, sandbox)?]),
            |v| {
                let mut entries = Vec::new();
                for e in v.getattr("entries")?.try_iter()? {
                    entries.push(entry_of(&e?)?);
                }
                let mut view = DiffView::new(&sandbox.sandbox_id, entries);
                if let Ok(s) = v.getattr("summary").and_then(|s| s.extract::<String>()) {
                    if !s.is_empty() {
                        view.summary = s;
                    }
                }
                Ok(view)
            },
        )
    }

    fn commit(&self, sandbox: &RsRef, message: Option<&str>) -> OpResult<Option<String>> {
        self.call(
            "commit",
            |py| {
                PyTuple::new(
                    py,
                    [sref(py, sandbox)?, message.into_pyobject(py)?.into_any()],
                )
            },
            |v| {
                if v.is_none() {
                    Ok(None)
                } else {
                    Ok(Some(v.str()?.to_string()))
                }
            },
        )
    }

    fn rollback(&self, sandbox: &RsRef, after_commit: bool) -> OpResult<()> {
        self.call(
            "rollback",
            |py| {
                PyTuple::new(
                    py,
                    [
                        sref(py, sandbox)?,
                        after_commit.into_pyobject(py)?.to_owned().into_any(),
                    ],
                )
            },
            |_| Ok(()),
        )
    }

    fn checkpoint(&self, sandbox: &RsRef, checkpoint_id: &str) -> OpResult<()> {
        self.call(
            "checkpoint",
            |py| {
                PyTuple::new(
                    py,
                    [
                        sref(py, sandbox)?,
                        checkpoint_id.into_pyobject(py)?.into_any(),
                    ],
                )
            },
            |_| Ok(()),
        )
    }

    fn restore_checkpoint(&self, sandbox: &RsRef, checkpoint_id: &str) -> OpResult<()> {
        self.call(
            "restore_checkpoint",
            |py| {
                PyTuple::new(
                    py,
                    [
                        sref(py, sandbox)?,
                        checkpoint_id.into_pyobject(py)?.into_any(),
                    ],
                )
            },
            |_| Ok(()),
        )
    }

    fn cleanup(&self, sandbox: &RsRef) -> OpResult<()> {
        self.call(
            "cleanup",
            |py| PyTuple::new(py, [sref(py, sandbox)?]),
            |_| Ok(()),
        )
    }

    fn is_rollbackable(&self) -> bool {
        self.call(
            "is_rollbackable",
            |py| Ok(PyTuple::empty(py)),
            |v| v.is_truthy(),
        )
        .unwrap_or(true)
    }
}
