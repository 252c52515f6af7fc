//! The engine-session layer: the manager, the scoped sandbox swap, the pending store, and
//! recovery of crashed sessions.
//!
//! - [`manager`]: [`Manager`], one per engine session (also `patchbox::SandboxManager`): the base
//!   snapshot, sandboxes (fresh or chained), finalize into a patch, completion routing.
//! - [`delegation`]: what an engine holds and gets back ([`SandboxInfo`](crate::session::delegation::SandboxInfo),
//!   [`SandboxResult`](crate::session::delegation::SandboxResult), routing).
//! - [`scoped`]: [`ScopedSandbox`](crate::session::scoped::ScopedSandbox), pointing an engine's tools at a
//!   sandbox for a scope; [`confine`]: Landlock confinement of the tools it runs.
//! - [`pending`]: the pending store ([`pending_select`]: accepting part of a pending patch); [`recover`]: liveness, prune, crash recovery, the reaper;
//!   [`layout`]: the names on disk; [`provenance`]: what produced a piece of work.
//!
//! ```
//! use patchbox::session::{Manager, Options};
//! let project = tempfile::tempdir()?;
//! std::fs::write(project.path().join("a.txt"), "one\n")?;
//! let root = tempfile::tempdir()?;
//! let opts = Options { root: Some(root.path().into()), ..Options::default() };
//! let mgr = Manager::with_options(project.path(), opts)?;
//! let sb = mgr.create_sandbox("task", None)?;
//! std::fs::write(sb.path.join("a.txt"), "two\n")?;
//! let pending = mgr.write_pending_patch("task", &mgr.finalize_sandbox(&sb)?.patch)?;
//! mgr.discard_sandbox(&sb)?;
//! let listed = patchbox::session::pending::list(root.path())?;
//! assert_eq!(listed[0].patch_path, pending);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod confine;
pub mod delegation;
pub mod layout;
pub mod manager;
pub mod overlay;
pub mod pending;
pub mod pending_select;
pub use crate::provenance;
pub mod recover;
pub mod remote;
pub mod scoped;
pub use crate::isolation::shared_lower;

pub use manager::{Manager, Options};
