//! [`BackendFactory`]: how a strategy's backends are made, by name, from the
//! [`StrategyRegistry`](crate::plan::custom::StrategyRegistry) — a new pending one, or one
//! found on disk — and the factories of the built-in strategies, which every registry holds
//! from its construction.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{copy_on_write, git_worktree, none, overlay, sqlite, Env};
use crate::plan::backend::Backend;
use crate::plan::error::SandboxError;
use crate::plan::model::Strategy;
use crate::plan::record::Record;

/// What a new pending backend is made for.
pub struct NewBackend<'a> {
    /// What every sandbox of the manager shares.
    pub env: &'a Arc<Env>,
    /// The strategy it is recorded as.
    pub strategy: &'a Strategy,
    /// Its plan's directory (the backend's own directory is made below it).
    pub plan_dir: &'a Path,
    /// The resource it isolates.
    pub resource_id: &'a str,
    /// The original resource.
    pub original: &'a Path,
}

/// Makes the backends of one strategy. Registered by name; `Send + Sync`.
pub trait BackendFactory: Send + Sync {
    /// A new pending backend (nothing on disk yet: [`Backend::create`] makes it).
    fn new_backend(&self, req: &NewBackend<'_>) -> Result<Box<dyn Backend>, SandboxError>;

    /// The backend of `record`, found on disk in `dir`.
    fn open_backend(
        &self,
        env: &Arc<Env>,
        record: Record,
        dir: PathBuf,
    ) -> Result<Box<dyn Backend>, SandboxError>;
}

/// Makes a new pending backend: the first half of an [`FnFactory`].
pub type NewFn = fn(&NewBackend<'_>) -> Result<Box<dyn Backend>, SandboxError>;

/// Opens a backend found on disk: the second half of an [`FnFactory`].
pub type OpenFn = fn(&Arc<Env>, Record, PathBuf) -> Result<Box<dyn Backend>, SandboxError>;

/// A factory of two functions: what a strategy without state of its own registers.
pub struct FnFactory {
    /// Makes a new pending backend.
    pub new: NewFn,
    /// Opens one found on disk.
    pub open: OpenFn,
}

impl BackendFactory for FnFactory {
    fn new_backend(&self, req: &NewBackend<'_>) -> Result<Box<dyn Backend>, SandboxError> {
        (self.new)(req)
    }

    fn open_backend(
        &self,
        env: &Arc<Env>,
        record: Record,
        dir: PathBuf,
    ) -> Result<Box<dyn Backend>, SandboxError> {
        (self.open)(env, record, dir)
    }
}

/// The built-in strategies by name, as every registry holds them from its construction.
pub fn builtins() -> Vec<(&'static str, Arc<dyn BackendFactory>)> {
    vec![
        (
            "none",
            Arc::new(FnFactory {
                new: |r| {
                    Ok(Box::new(none::NoSandbox::new(
                        r.plan_dir,
                        r.resource_id,
                        r.original,
                    )))
                },
                open: |_, rec, dir| Ok(Box::new(none::NoSandbox::open(rec, dir))),
            }),
        ),
        (
            "copy_on_write",
            Arc::new(FnFactory {
                new: |r| {
                    Ok(Box::new(copy_on_write::CopyOnWrite::new(
                        r.env.clone(),
                        r.plan_dir,
                        r.resource_id,
                        r.original,
                    )))
                },
                open: |env, rec, dir| {
                    Ok(Box::new(copy_on_write::CopyOnWrite::open(
                        env.clone(),
                        rec,
                        dir,
                    )?))
                },
            }),
        ),
        (
            "overlay",
            Arc::new(FnFactory {
                new: |r| {
                    Ok(Box::new(overlay::Overlay::new(
                        r.env.clone(),
                        r.plan_dir,
                        r.resource_id,
                        r.original,
                    )))
                },
                open: |env, rec, dir| Ok(Box::new(overlay::Overlay::open(env.clone(), rec, dir)?)),
            }),
        ),
        (
            "git_worktree",
            Arc::new(FnFactory {
                new: |r| {
                    Ok(Box::new(git_worktree::GitWorktree::new(
                        r.env.clone(),
                        r.plan_dir,
                        r.resource_id,
                        r.original,
                    )))
                },
                open: |env, rec, dir| {
                    Ok(Box::new(git_worktree::GitWorktree::open(
                        env.clone(),
                        rec,
                        dir,
                    )?))
                },
            }),
        ),
        (
            "transaction_rollback",
            Arc::new(FnFactory {
                new: |r| {
                    Ok(Box::new(sqlite::SqliteSandbox::new(
                        r.plan_dir,
                        r.resource_id,
                        r.original,
                    )))
                },
                open: |_, rec, dir| Ok(Box::new(sqlite::SqliteSandbox::open(rec, dir)?)),
            }),
        ),
    ]
}
