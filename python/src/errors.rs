//! The exception hierarchy, named as the plan-executor engines name theirs, and the
//! conversions from the library's two error enums.
//!
//! ```text
//! PatchboxError(Exception)          patchbox::Error (sessions, apply, pending; .kind)
//! └── SandboxError                  patchbox::plan::SandboxError::Sandbox
//!     ├── SandboxCreationError      ::Creation
//!     ├── SandboxCommitError        ::Commit        (.files)
//!     ├── SandboxRollbackError      ::Rollback      (.files)
//!     ├── SandboxStateError         ::State         (.from_status, .to_status)
//!     ├── AtomicCommitError         ::AtomicCommit  (.rolled_back_ids, .failed_rollback_ids)
//!     └── ProtocolMismatchError     a custom strategy that lacks an operation
//! ```
//!
//! Every instance also carries `.kind` (the Rust variant's stable name) and, where the Rust
//! error names one, `.sandbox_id`; the message is the Rust error's `Display`, which names the
//! path of any I/O failure.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use patchbox::plan::SandboxError;

create_exception!(
    _native,
    PatchboxError,
    PyException,
    "Base of every patchbox error."
);
create_exception!(
    _native,
    SandboxError_,
    PatchboxError,
    "A plan-sandbox failure."
);
create_exception!(
    _native,
    SandboxCreationError,
    SandboxError_,
    "A sandbox could not be made; nothing of it is left on disk."
);
create_exception!(
    _native,
    SandboxCommitError,
    SandboxError_,
    "A commit was refused or failed; the original is as it was."
);
create_exception!(
    _native,
    SandboxRollbackError,
    SandboxError_,
    "A rollback was refused or failed."
);
create_exception!(
    _native,
    SandboxStateError,
    SandboxError_,
    "An operation not valid in the sandbox's status."
);
create_exception!(
    _native,
    AtomicCommitError,
    SandboxError_,
    "commit_all failed; committed sandboxes were rolled back LIFO."
);
create_exception!(
    _native,
    ProtocolMismatchError,
    SandboxError_,
    "A custom strategy does not implement the strategy protocol."
);

/// Adds the classes to the module (`SandboxError_` under its Python name `SandboxError`).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("PatchboxError", py.get_type::<PatchboxError>())?;
    m.add("SandboxError", py.get_type::<SandboxError_>())?;
    m.add(
        "SandboxCreationError",
        py.get_type::<SandboxCreationError>(),
    )?;
    m.add("SandboxCommitError", py.get_type::<SandboxCommitError>())?;
    m.add(
        "SandboxRollbackError",
        py.get_type::<SandboxRollbackError>(),
    )?;
    m.add("SandboxStateError", py.get_type::<SandboxStateError>())?;
    m.add("AtomicCommitError", py.get_type::<AtomicCommitError>())?;
    m.add(
        "ProtocolMismatchError",
        py.get_type::<ProtocolMismatchError>(),
    )?;
    Ok(())
}

/// Sets attributes on a freshly made exception; a failure to set one is not worth hiding
/// the original error for, so it is ignored.
fn with_attrs(err: PyErr, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    Python::attach(|py| {
        let value = err.value(py);
        for (name, v) in attrs {
            let _ = value.setattr(*name, v.clone_ref(py));
        }
    });
    err
}

/// Converts a session/apply-layer error.
#[allow(dead_code)] // used by the session layer (session.rs, apply.rs)
pub(crate) fn lib_err(e: patchbox::Error) -> PyErr {
    let kind = e.kind();
    let err = PatchboxError::new_err(e.to_string());
    Python::attach(|py| {
        with_attrs(
            err,
            &[(
                "kind",
                kind.into_pyobject(py)
                    .map(|k| k.into_any().unbind())
                    .unwrap_or_else(|_| py.None()),
            )],
        )
    })
}

/// Converts a plan-layer error into its class, with its fields as attributes.
pub(crate) fn plan_err(e: SandboxError) -> PyErr {
    let msg = e.to_string();
    let kind = e.kind();
    Python::attach(|py| {
        let s = |v: &str| {
            v.into_pyobject(py)
                .map(|o| o.into_any().unbind())
                .unwrap_or_else(|_| py.None())
        };
        let list = |v: &[String]| {
            v.to_vec()
                .into_pyobject(py)
                .map(|o| o.into_any().unbind())
                .unwrap_or_else(|_| py.None())
        };
        let opt = |v: &Option<String>| v.as_deref().map(s).unwrap_or_else(|| py.None());
        let mut attrs = vec![("kind", s(kind))];
        let err = match &e {
            SandboxError::Sandbox { sandbox_id, .. } => {
                attrs.push(("sandbox_id", opt(sandbox_id)));
                SandboxError_::new_err(msg)
            }
            SandboxError::Creation { resource_id, .. } => {
                attrs.push(("resource_id", s(resource_id)));
                SandboxCreationError::new_err(msg)
            }
            SandboxError::Commit {
                sandbox_id, files, ..
            } => {
                attrs.push(("sandbox_id", s(sandbox_id)));
                attrs.push(("files", list(files)));
                SandboxCommitError::new_err(msg)
            }
            SandboxError::Rollback {
                sandbox_id, files, ..
            } => {
                attrs.push(("sandbox_id", s(sandbox_id)));
                attrs.push(("files", list(files)));
                SandboxRollbackError::new_err(msg)
            }
            SandboxError::State {
                sandbox_id,
                from,
                to,
            } => {
                attrs.push(("sandbox_id", opt(sandbox_id)));
                attrs.push(("from_status", s(from.name())));
                attrs.push(("to_status", s(to.name())));
                SandboxStateError::new_err(msg)
            }
            SandboxError::AtomicCommit {
                plan_id,
                rolled_back_ids,
                failed_rollback_ids,
                failed_sandbox_id,
                ..
            } => {
                attrs.push(("plan_id", s(plan_id)));
                attrs.push(("rolled_back_ids", list(rolled_back_ids)));
                attrs.push(("failed_rollback_ids", list(failed_rollback_ids)));
                attrs.push(("sandbox_id", opt(failed_sandbox_id)));
                AtomicCommitError::new_err(msg)
            }
        };
        with_attrs(err, &attrs)
    })
}
