//! SQL through a `transaction_rollback` sandbox: statements and savepoints inside its open
//! transaction, with Python values (`None`, `int`, `float`, `str`, `bytes`) both ways.
//!
//! Why: a SQLite sandbox has no files (`get_path` is refused); the actor's writes go
//! through the sandbox's connection. Invariants: other strategies raise `SandboxError`;
//! the GIL is released while the statement runs; a value of another type raises
//! `TypeError` before anything runs.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use patchbox::plan::strategy::sqlite::SqlValue;
use patchbox::plan::{Sandbox, SandboxError};

use crate::errors::plan_err;

fn value_in(v: &Bound<'_, PyAny>) -> PyResult<SqlValue> {
    if v.is_none() {
        Ok(SqlValue::Null)
    } else if v.is_instance_of::<pyo3::types::PyBool>() || v.is_instance_of::<pyo3::types::PyInt>()
    {
        Ok(SqlValue::Integer(v.extract()?))
    } else if v.is_instance_of::<pyo3::types::PyFloat>() {
        Ok(SqlValue::Real(v.extract()?))
    } else if v.is_instance_of::<pyo3::types::PyString>() {
        Ok(SqlValue::Text(v.extract()?))
    } else if let Ok(b) = v.cast::<PyBytes>() {
        Ok(SqlValue::Blob(b.as_bytes().to_vec()))
    } else {
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a SQL parameter is None, int, float, str or bytes, not {}",
            v.get_type().name()?
        )))
    }
}

fn value_out(py: Python<'_>, v: &SqlValue) -> PyResult<Py<PyAny>> {
    Ok(match v {
        SqlValue::Null => py.None(),
        SqlValue::Integer(i) => i.into_pyobject(py)?.into_any().unbind(),
        SqlValue::Real(f) => f.into_pyobject(py)?.into_any().unbind(),
        SqlValue::Text(s) => s.into_pyobject(py)?.into_any().unbind(),
        SqlValue::Blob(b) => PyBytes::new(py, b).into_any().unbind(),
    })
}

fn not_sqlite(sb: &Arc<dyn Sandbox>) -> PyErr {
    plan_err(SandboxError::sandbox(
        Some(sb.sandbox_id()),
        format!(
            "SQL runs in transaction_rollback sandboxes; this one is {}",
            sb.strategy()
        ),
    ))
}

/// Runs one statement; returns its rows as tuples.
pub(crate) fn execute(
    py: Python<'_>,
    sb: &Arc<dyn Sandbox>,
    sql: &str,
    params: Vec<Bound<'_, PyAny>>,
) -> PyResult<Vec<Py<PyAny>>> {
    let params: Vec<SqlValue> = params.iter().map(value_in).collect::<PyResult<_>>()?;
    if sb.sql().is_none() {
        return Err(not_sqlite(sb));
    }
    let s = sb.clone();
    let rows = py
        .detach(|| match s.sql() {
            Some(db) => db.execute(sql, &params),
            None => Err(SandboxError::sandbox(Some(s.sandbox_id()), "not SQLite")),
        })
        .map_err(plan_err)?;
    rows.rows
        .iter()
        .map(|row| {
            let vals: Vec<Py<PyAny>> = row
                .iter()
                .map(|v| value_out(py, v))
                .collect::<PyResult<_>>()?;
            Ok(PyTuple::new(py, vals)?.into_any().unbind())
        })
        .collect()
}

/// `savepoint` (`SAVEPOINT`) or `rollback_to` (`ROLLBACK TO`) `name`.
pub(crate) fn savepoint(
    py: Python<'_>,
    sb: &Arc<dyn Sandbox>,
    step: &str,
    name: &str,
) -> PyResult<()> {
    if sb.sql().is_none() {
        return Err(not_sqlite(sb));
    }
    let s = sb.clone();
    py.detach(|| match s.sql() {
        Some(db) if step == "savepoint" => db.savepoint(name),
        Some(db) => db.rollback_to_savepoint(name),
        None => Err(SandboxError::sandbox(Some(s.sandbox_id()), "not SQLite")),
    })
    .map_err(plan_err)
}
