//! The C++ bridge (feature `ffi`): the Rust side of the C++ API in `include/patchbox/`.
//!
//! One `#[cxx::bridge]` per public header it serves: [`sandbox`] for `<patchbox/sandbox.hpp>`
//! (the [`SandboxManager`](crate::SandboxManager) and its callbacks), [`apply`] for
//! `<patchbox/apply.hpp>` (`apply_patch`, `undo_apply`, `apply_pending`), [`store`] for
//! `<patchbox/store.hpp>` (pending patches and sessions under the root), [`plan`] for
//! `<patchbox/plan.hpp>` (the plan-sandbox layer, [`crate::plan`]), [`fs_utils`] for
//! `<patchbox/fs_utils.hpp>` (the patch between two trees), and [`error`] for
//! `<patchbox/error.hpp>` (the error kind names). The C++ glue is in `cpp/`; `build.rs`
//! compiles both into this crate, so the Rust staticlib is the whole C++ library. Rules every
//! bridge keeps:
//!
//! * Paths and patches cross as bytes (`&[u8]` / `Vec<u8>`): paths need not be UTF-8 on Unix.
//! * Every fallible function returns `Result`, whose error string is `"<kind>\x1f<message>"`
//!   ([`KIND_SEPARATOR`]); `<kind>` is [`Error::kind`] or `internal`. The C++ glue splits it
//!   and throws `patchbox::Error` with the matching `patchbox::ErrorKind`. The [`plan`] bridge's
//!   kinds are `plan_<kind>` with details after the message (see its docs); its glue throws
//!   the `patchbox::plan::SandboxError` subclass of that kind (`ErrorKind::Plan`).
//! * No panic crosses the boundary: every bridge function runs under
//!   [`std::panic::catch_unwind`]; a panic becomes an `internal` error (or a neutral value for
//!   the infallible getters). cxx would otherwise abort the process.
//! * Reports cross as plain shared structs (an absent path is a `has_*` flag, enums are cxx
//!   shared enums); an apply's conflicts and refusals are in its report, not errors.
//! * C++ callbacks (copy progress, the completion decision) come in as opaque C++ types whose
//!   methods are `noexcept`: the glue catches whatever the user's callback throws.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use crate::error::Error;

pub mod apply;
pub mod error;
pub mod fs_utils;
pub mod plan;
pub mod sandbox;
pub mod store;

/// Separates the error kind from the message in a bridge error string.
pub const KIND_SEPARATOR: char = '\x1f';

/// Encodes a core error as `"<kind>\x1f<message>"`.
fn encode(e: &Error) -> String {
    format!("{}{KIND_SEPARATOR}{e}", e.kind())
}

/// An `internal` error string.
fn internal(msg: &str) -> String {
    format!("internal{KIND_SEPARATOR}{msg}")
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Runs `f`, turning a panic into an `internal` error.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(internal(&format!(
            "panic in patchbox: {}",
            panic_message(p.as_ref())
        )))
    })
}

/// Runs an infallible `f`; a panic yields `T::default()`.
fn guarded_or_default<T: Default>(f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_default()
}

fn core<T>(r: crate::Result<T>) -> Result<T, String> {
    r.map_err(|e| encode(&e))
}

fn path_from(b: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(b))
}

fn path_bytes(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_kind() {
        let e = Error::InvalidId {
            id: "../x".into(),
            reason: "contains '/'",
        };
        let s = encode(&e);
        let (kind, msg) = s.split_once(KIND_SEPARATOR).unwrap();
        assert_eq!(kind, "invalid_id");
        assert!(msg.contains("../x"));
    }

    #[test]
    fn panics_become_internal_errors() {
        let r: Result<(), String> = guarded(|| panic!("boom"));
        let s = r.unwrap_err();
        assert!(s.starts_with("internal\x1f"), "{s}");
        assert!(s.contains("boom"), "{s}");
        assert_eq!(guarded_or_default(|| -> u32 { panic!("x") }), 0);
    }
}
