//! What the engine holds and gets back for a delegation: the sandbox handle
//! ([`SandboxInfo`]), what the delegation changed ([`SandboxResult`]), and where the work went
//! when it completed ([`Decision`], [`Routed`], [`Completion`]).
//!
//! Plain data, shared by the manager, the scoped swap and the bridges, so that none of them
//! imports another to name a sandbox.

use std::path::PathBuf;

use crate::id::DelegationId;

/// A delegation's sandbox, as handed to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxInfo {
    /// The sandbox directory `<session>/d-<id>`: the delegation works here.
    pub path: PathBuf,
    /// The delegation id.
    pub delegation_id: DelegationId,
    /// The session's base snapshot the patch is computed against (kept by chained
    /// sandboxes, so their patch is cumulative).
    pub base_dir: PathBuf,
    /// How the sandbox is isolated: a copy, or an overlay mount on `path`.
    pub mode: IsolationMode,
}

/// The isolation an engine asks for ([`crate::session::manager::Options::isolation`]).
///
/// ```
/// use patchbox::Isolation;
/// assert_eq!(Isolation::from_name("overlay"), Some(Isolation::Overlay));
/// assert_eq!(Isolation::Auto.name(), "auto");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Every sandbox is a copy of the session snapshot (reflinked where the filesystem can).
    Copy,
    /// Every sandbox is an overlay mount over one materialized copy of the snapshot: the
    /// kernel's OverlayFS when the process may mount, else `fuse-overlayfs` when installed and
    /// `/dev/fuse` is usable, else a copy. The manager reports what it got
    /// ([`crate::session::manager::SandboxManager::isolation_mode`], [`SandboxInfo::mode`]).
    Overlay,
    /// Overlay when it can be had, else copy (today the same fallback chain as `Overlay`).
    /// The default: the whole test suite passes with it, in both outcomes, the
    /// symlink-swapping race test (`tests/chokepoint.rs`) included.
    Auto,
}

/// The environment variable naming the default isolation (`copy`, `overlay` or `auto`) for
/// options that do not set one.
pub const ISOLATION_ENV: &str = "PATCHBOX_ISOLATION";

impl Isolation {
    /// Its name: `copy`, `overlay`, `auto`.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Copy => "copy",
            Isolation::Overlay => "overlay",
            Isolation::Auto => "auto",
        }
    }

    /// The isolation named `name`.
    pub fn from_name(name: &str) -> Option<Isolation> {
        match name {
            "copy" => Some(Isolation::Copy),
            "overlay" => Some(Isolation::Overlay),
            "auto" => Some(Isolation::Auto),
            _ => None,
        }
    }
}

impl Default for Isolation {
    /// `$PATCHBOX_ISOLATION` when it names one, else [`Isolation::Auto`].
    fn default() -> Self {
        std::env::var(ISOLATION_ENV)
            .ok()
            .and_then(|v| Isolation::from_name(&v))
            .unwrap_or(Isolation::Auto)
    }
}

/// The isolation a sandbox got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum IsolationMode {
    /// A copy of the snapshot.
    #[default]
    Copy,
    /// A kernel OverlayFS mount.
    KernelOverlay,
    /// A `fuse-overlayfs` mount.
    FuseOverlay,
}

impl IsolationMode {
    /// Its name: `copy`, `kernel-overlay`, `fuse-overlay`.
    pub fn name(self) -> &'static str {
        match self {
            IsolationMode::Copy => "copy",
            IsolationMode::KernelOverlay => "kernel-overlay",
            IsolationMode::FuseOverlay => "fuse-overlay",
        }
    }
}

/// What a delegation changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxResult {
    /// The git-style patch (empty when nothing changed). Bytes: file contents need not be
    /// UTF-8.
    pub patch: Vec<u8>,
    /// Every path the patch touches, relative to the project, sorted.
    pub files_touched: Vec<PathBuf>,
    /// Paths added by the delegation.
    pub added: Vec<PathBuf>,
    /// Paths whose content, mode or type changed.
    pub modified: Vec<PathBuf>,
    /// Paths deleted by the delegation.
    pub deleted: Vec<PathBuf>,
    /// New paths matching the project's ignore rules (build outputs…), not in the patch.
    pub ignored: Vec<PathBuf>,
    /// The base snapshot directory.
    pub base_dir: PathBuf,
    /// The sandbox directory.
    pub head_dir: PathBuf,
}

impl SandboxResult {
    /// The patch as text (lossy where a file's content is not UTF-8).
    pub fn patch_text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.patch)
    }
}

/// The consumer's answer when a delegation completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The consumer takes the patch (and applies it itself).
    Accept,
    /// The patch goes to the pending store.
    Reject,
}

/// Where a completed delegation's work went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Routed {
    /// Accepted: the caller has the patch in the result.
    Accepted,
    /// Stored as a pending patch at this path.
    Pending(PathBuf),
    /// The delegation changed nothing; there was nothing to route.
    Unchanged,
}

/// The outcome of [`SandboxManager::complete_sandbox`](crate::session::manager::SandboxManager::complete_sandbox).
#[derive(Clone, Debug)]
pub struct Completion {
    /// What the delegation changed.
    pub result: SandboxResult,
    /// Where it went.
    pub routed: Routed,
}

/// A decision callback: sees the result and accepts or rejects. An `Err` or a panic counts
/// as reject.
pub type DecideFn<'a> = &'a dyn Fn(&SandboxResult) -> std::result::Result<Decision, String>;
