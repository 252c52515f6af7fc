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
//! PatchboxError of kind "unexpected"  ::Unexpected (a failure that is not sandbox-level)
//! ```
//!
//! The classes are defined in Python, in `patchbox.errors` (python/patchbox/errors.py), and
//! imported from there: they carry the documented names and pickle with their attributes.
//! Every instance also carries `.kind` (the Rust variant's stable name) and, where the Rust
//! error names one, `.sandbox_id`; the message is the Rust error's `Display`, which names the
//! path of any I/O failure.

use pyo3::prelude::*;

use patchbox::plan::SandboxError;

/// The classes themselves, defined in Python (python/patchbox/errors.py) so that their names
/// are the documented ones (`patchbox.errors.SandboxError`, not an internal `_native` type)
/// and their instances pickle; each is imported once, on its first use.
mod classes {
    pyo3::import_exception!(patchbox.errors, PatchboxError);
    pyo3::import_exception!(patchbox.errors, SandboxError);
    pyo3::import_exception!(patchbox.errors, SandboxCreationError);
    pyo3::import_exception!(patchbox.errors, SandboxCommitError);
    pyo3::import_exception!(patchbox.errors, SandboxRollbackError);
    pyo3::import_exception!(patchbox.errors, SandboxStateError);
    pyo3::import_exception!(patchbox.errors, AtomicCommitError);
    pyo3::import_exception!(patchbox.errors, ProtocolMismatchError);
}

// `SandboxError_` in Rust, beside the library's `plan::SandboxError` enum.
pub(crate) use classes::{
    AtomicCommitError, PatchboxError, ProtocolMismatchError, SandboxCommitError,
    SandboxCreationError, SandboxError as SandboxError_, SandboxRollbackError, SandboxStateError,
};

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
            // Not a sandbox-level failure (a custom strategy's own exception of another
            // kind, a panic): the base class, so `except SandboxError` does not take it for
            // one.
            SandboxError::Unexpected { sandbox_id, .. } => {
                attrs.push(("sandbox_id", opt(sandbox_id)));
                PatchboxError::new_err(msg)
            }
        };
        with_attrs(err, &attrs)
    })
}
