//! # patchbox
//!
//! Session sandboxes for agent engines. An engine session snapshots the user's project into
//! `<root>/<session>/base/`; each delegated sub-agent works in its own copy `d-<id>/`; its work
//! comes back as a git-style patch that `git apply` accepts, or waits in
//! `pending/<id>.patch`. The user's project is never written except by an explicit apply.

pub mod error;
pub mod guard;
pub mod layout;
pub mod odb;
pub mod relpath;

pub use error::{Error, Result};
pub use relpath::RelPath;
pub mod apply;
pub mod base;
pub mod diff;
pub mod manager;
pub mod patch_parse;
pub mod patch_write;
pub mod pending;
pub mod recover;
pub mod select;
pub mod snapshot;

pub use manager::{
    Completion, DecideFn, Decision, Options, Routed, SandboxInfo, SandboxManager, SandboxResult,
};
#[cfg(feature = "ffi")]
pub mod ffi;
