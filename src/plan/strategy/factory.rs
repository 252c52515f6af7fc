//! [`BackendFactory`]: how a strategy's backends are made, by name, from the
//! [`StrategyRegistry`](crate::plan::custom::StrategyRegistry) — a new pending one, or one
//! found on disk. Each built-in strategy's file defines its own `FACTORY` with
//! [`FnFactory`]; [`builtins`](crate::plan::strategy::builtins) lists them by name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Env;
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
