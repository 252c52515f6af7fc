//! What the engine holds and gets back for a delegation: the sandbox handle
//! ([`SandboxInfo`]), what the delegation changed ([`SandboxResult`]), and where the work went
//! when it completed ([`Decision`], [`Routed`], [`Completion`]).
//!
//! Plain data, shared by the manager, the scoped swap and the bridges, so that none of them
//! imports another to name a sandbox.

use std::path::PathBuf;

/// A delegation's sandbox, as handed to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxInfo {
    /// The sandbox directory `<session>/d-<id>`: the delegation works here.
    pub path: PathBuf,
    /// The delegation id.
    pub delegation_id: String,
    /// The session's base snapshot the patch is computed against (kept by chained
    /// sandboxes, so their patch is cumulative).
    pub base_dir: PathBuf,
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

/// The outcome of [`SandboxManager::complete_sandbox`](crate::SandboxManager::complete_sandbox).
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
