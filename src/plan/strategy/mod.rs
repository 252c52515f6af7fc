//! The built-in strategies, and what they share: the lifecycle steps every one of them takes
//! the same way (activation on first path, containment of `get_path`, cleanup).
//!
//! | strategy | module |
//! |---|---|
//! | `none` | [`none`] |
//! | `copy_on_write` | [`copy_on_write`] |
//! | `overlay` | [`overlay`] |
//! | `git_worktree` | [`git_worktree`] |
//! | `transaction_rollback` | [`sqlite`] |
//!
//! Each is a [`Backend`](crate::plan::backend::Backend) registered by name in every
//! [`StrategyRegistry`](crate::plan::custom::StrategyRegistry) ([`factory`]); a strategy
//! written outside the crate registers its own factory the same way, and uses the shared
//! steps below (`record_created`, `require_created`, `activate_for_path`, `cleanup_dir`),
//! which are public for it.
//!
//! `copy_on_write` (and `overlay`, which commits the same way) build on [`tree_base`] (the
//! stable snapshot and the diff against it) and [`through_apply`] (commit and undo through
//! the atomic 3-way apply).
//!
//! Every strategy that commits files refuses, at its check and at its commit and before it
//! writes anything to the original, a symlink the sandbox adds or changes that points outside
//! the resource (one rule, in `links.rs`): `copy_on_write` and `overlay` in [`through_apply`],
//! `git_worktree` when it plans its commit. `none` writes straight into the original, so
//! there is nothing to refuse before the fact; `transaction_rollback` has no files.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::error::SandboxError;
use super::model::SandboxContext;
use super::record::{Lifecycle, Record, State};
use super::status::Status;
use crate::apply::store::UndoStore;

pub mod builtins;
mod change_record;
pub mod copy_on_write;
pub mod factory;
pub mod git_worktree;
pub(crate) mod links;
pub mod none;
pub mod overlay;
pub mod sqlite;
pub mod through_apply;
pub mod tree_base;

/// Runs `commit`; when it panics, `settle` settles what it may have left in flight (its
/// change may already be in the original) before the panic goes on, so that the sandbox's
/// status says whether the change landed. `commit` must hold the sandbox's operation lock
/// only inside, so that `settle` can take it.
pub(super) fn settle_on_panic<T>(commit: impl FnOnce() -> T, settle: impl FnOnce()) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(commit)) {
        Ok(r) => r,
        Err(panic) => {
            settle();
            std::panic::resume_unwind(panic)
        }
    }
}

/// What every sandbox of one manager shares.
pub struct Env {
    /// The plans directory (`<root>/plans`).
    pub plans_dir: PathBuf,
    /// The undo records of commits (`<root>/plans/undo`).
    pub undo: UndoStore,
    /// Directories never copied into a sandbox (the root itself, when inside a resource).
    pub exclude: Vec<PathBuf>,
    /// The snapshot store (`<root>/plans/lower`, see [`crate::isolation::snapshot`]).
    pub lowers: PathBuf,
    /// Shared snapshots' listings, loaded once per manager.
    pub lower_bases:
        parking_lot::Mutex<std::collections::HashMap<String, Arc<tree_base::TreeBase>>>,
}

impl Env {
    /// The base of shared snapshot `id`, loaded on first need.
    pub(crate) fn lower_base(&self, id: &str) -> Result<Arc<tree_base::TreeBase>, crate::Error> {
        if let Some(b) = self.lower_bases.lock().get(id) {
            return Ok(b.clone());
        }
        let b = Arc::new(crate::isolation::snapshot::load_base(&self.lowers, id)?);
        self.lower_bases.lock().insert(id.to_string(), b.clone());
        Ok(b)
    }
}

/// A [`SandboxError::Creation`] from a plan-layer error.
pub(crate) fn creation_err(resource_id: &str, what: &str, e: SandboxError) -> SandboxError {
    SandboxError::Creation {
        resource_id: resource_id.to_string(),
        reason: format!("{what}: {e}"),
        source: None,
    }
}

/// The end of every strategy's `create`: stores `record`, moves `Pending → Created` (which
/// persists it) and returns the context. When the state cannot be recorded, `undo` removes
/// what the strategy made outside its directory, the directory goes, and the error is a
/// [`SandboxError::Creation`]: nothing of the sandbox is left.
pub fn record_created(
    lc: &Lifecycle,
    st: &mut State,
    record: Record,
    resource_id: &str,
    undo: impl FnOnce(&State),
) -> Result<SandboxContext, SandboxError> {
    st.record = Some(record);
    if let Err(e) = lc.advance(st, Status::Created) {
        undo(st);
        st.record = None;
        let _ = remove_dir(lc.dir());
        return Err(creation_err(resource_id, "cannot record its state", e));
    }
    st.record
        .as_ref()
        .map(Record::context)
        .ok_or_else(|| SandboxError::sandbox(Some(lc.id().as_str()), "sandbox has no context"))
}

/// Refuses operations that need the sandbox to exist (`Pending`, `CleanedUp`, `Errored`).
pub fn require_created(lc: &Lifecycle, st: &State) -> Result<(), SandboxError> {
    match st.status {
        Status::Created | Status::Active | Status::Committed | Status::RolledBack => Ok(()),
        from => Err(SandboxError::State {
            sandbox_id: Some(lc.id().to_string()),
            from,
            to: Status::Active,
        }),
    }
}

/// `get_path`'s step: a created or rolled-back sandbox becomes active; an active one stays;
/// anything else is refused.
pub fn activate_for_path(lc: &Lifecycle, st: &mut State) -> Result<(), SandboxError> {
    match st.status {
        Status::Active => Ok(()),
        _ => lc.advance(st, Status::Active),
    }
}

/// `rel` inside the sandbox root of `st`: absolute paths and `..` are refused, and so is a
/// path whose existing part leads through a symlink out of the sandbox.
pub(crate) fn sandbox_path_of(
    lc: &Lifecycle,
    st: &State,
    rel: &Path,
) -> Result<PathBuf, SandboxError> {
    let root = st
        .record
        .as_ref()
        .map(|r| r.sandbox_path.clone())
        .ok_or_else(|| SandboxError::sandbox(Some(lc.id().as_str()), "sandbox has no context"))?;
    contained(&root, rel).map_err(|reason| {
        SandboxError::sandbox(
            Some(lc.id().as_str()),
            format!("refused path {}: {reason}", rel.display()),
        )
    })
}

/// The containment rule of `get_path`, for any root.
pub(crate) fn contained(root: &Path, rel: &Path) -> Result<PathBuf, &'static str> {
    let root_real = std::fs::canonicalize(root).map_err(|_| "the sandbox root is missing")?;
    let mut out = root.to_path_buf();
    let mut real = root_real.clone();
    for c in rel.components() {
        match c {
            Component::CurDir => continue,
            Component::Normal(s) => {
                out.push(s);
                real.push(s);
            }
            Component::ParentDir => return Err("path contains '..'"),
            Component::RootDir | Component::Prefix(_) => return Err("path is absolute"),
        }
        match std::fs::symlink_metadata(&real) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(&real) {
                Ok(t) if t.starts_with(&root_real) => real = t,
                Ok(_) => return Err("a symlink in it leads out of the sandbox"),
                Err(_) => {
                    // Dangling: only a relative target that stays below its directory.
                    let target = std::fs::read_link(&real).map_err(|_| "unreadable symlink")?;
                    let escapes = target.is_absolute()
                        || target.components().any(|c| c == Component::ParentDir);
                    if escapes {
                        return Err("a symlink in it leads out of the sandbox");
                    }
                    real.pop();
                    real.push(target);
                }
            },
            _ => {}
        }
    }
    Ok(out)
}

/// Removes a directory tree; a missing one is fine (the strategies' name for
/// [`state_dir::remove_dir_tree`](crate::fs::state_dir::remove_dir_tree)).
pub(crate) use crate::fs::state_dir::remove_dir_tree as remove_dir;

/// Cleanup as every strategy does it: the steps the lifecycle requires from the current
/// status to `CleanedUp` are checked, `teardown` undoes what the strategy set up outside
/// its directory (a mount, a worktree), then the sandbox's directory goes.
pub fn cleanup_dir(
    lc: &Lifecycle,
    st: &mut State,
    teardown: impl FnOnce() -> Result<(), SandboxError>,
) -> Result<(), SandboxError> {
    let path: &[Status] = match st.status {
        Status::CleanedUp | Status::Pending => return Ok(()),
        Status::Created => &[Status::Active, Status::RolledBack, Status::CleanedUp],
        Status::Active => &[Status::RolledBack, Status::CleanedUp],
        _ => &[Status::CleanedUp],
    };
    let mut from = st.status;
    for &to in path {
        lc.check(from, to)?;
        from = to;
    }
    teardown()?;
    remove_dir(lc.dir())
        .map_err(|e| SandboxError::from_lower(Some(lc.id().as_str()), "remove the sandbox", e))?;
    st.status = Status::CleanedUp;
    if let Some(r) = st.record.as_mut() {
        r.status = Status::CleanedUp;
    }
    Ok(())
}
