//! # patchbox
//!
//! Session sandboxes for agent engines. An engine session snapshots the user's project into
//! `<root>/<session>/base/`; each delegated sub-agent works in its own copy `d-<id>/`; its work
//! comes back as a git-style patch that `git apply` accepts, or waits in
//! `pending/<id>.patch`. The user's project is never written except by an explicit apply.

pub mod apply;
pub mod error;
#[cfg(feature = "ffi")]
pub mod ffi;
pub mod fs;
pub mod git;
pub mod patch;
pub mod session;
pub mod tree;

pub use error::{Error, Result};
pub use fs::RelPath;
pub use session::manager::{
    Completion, DecideFn, Decision, Options, Routed, SandboxInfo, SandboxManager, SandboxResult,
};
