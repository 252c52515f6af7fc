//! The registry of strategies by name: the built-in ones (registered at construction), Rust
//! backends ([`StrategyRegistry::register_backend`]), in-process protocol factories, and
//! shared libraries loaded only from allowed prefixes. Sandboxes are made and reopened
//! through it ([`new_sandbox`], [`open_sandbox`]), whatever their strategy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

pub use super::error::RegistryError;
use super::native;
use super::protocol::StrategyProtocol;
use super::sandbox::CustomSandbox;
use crate::plan::backend::Backend;
use crate::plan::error::SandboxError;
use crate::plan::handle::SandboxHandle;
use crate::plan::model::Strategy;
use crate::plan::record::Record;
use crate::plan::sandbox::Sandbox;
use crate::plan::strategy::factory::{BackendFactory, NewBackend};
use crate::plan::strategy::{builtins, Env};

/// Makes the protocol instance of a new sandbox (called once per sandbox made or reopened).
pub type StrategyFactory = Arc<dyn Fn() -> Arc<dyn StrategyProtocol> + Send + Sync>;

/// Where a strategy comes from, in a configuration ([`StrategyRegistry::register_all_from_config`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModuleSpec {
    /// The shared library's path.
    pub module: PathBuf,
    /// The class: the library exports `patchbox_strategy_<class>`.
    pub class: String,
}

/// The strategies a [`PlanManager`](crate::plan::PlanManager) can make sandboxes of, by name.
/// `Send + Sync`; share it as `Arc<StrategyRegistry>`.
///
/// Every registry holds the built-in strategies (`none`, `copy_on_write`, `overlay`,
/// `git_worktree`, `transaction_rollback`) from its construction; the names a user
/// registers are its custom strategies ([`StrategyRegistry::names`]).
///
/// Strategies come from the host process ([`StrategyRegistry::register_factory`],
/// [`StrategyRegistry::register_instance`], the C++ `SandboxManager::register_strategy`) or
/// from a shared library ([`StrategyRegistry::register`]), which is loaded only when its
/// canonical path is under a prefix the host allowed. None is allowed by default: a registry
/// loads no code unless the host says where from.
pub struct StrategyRegistry {
    allowed: RwLock<Vec<PathBuf>>,
    entries: RwLock<BTreeMap<String, Entry>>,
}

/// One registered strategy.
#[derive(Clone)]
struct Entry {
    /// Makes its backends.
    backend: Arc<dyn BackendFactory>,
    /// Its protocol factory, for a strategy registered by protocol.
    protocol: Option<StrategyFactory>,
    /// Whether it is a built-in strategy.
    builtin: bool,
}

/// The backends of a strategy registered by protocol: a [`CustomSandbox`] over a protocol
/// instance its factory makes.
struct ProtocolFactory {
    name: String,
    factory: StrategyFactory,
}

impl BackendFactory for ProtocolFactory {
    fn new_backend(&self, r: &NewBackend<'_>) -> Result<Box<dyn Backend>, SandboxError> {
        Ok(Box::new(CustomSandbox::new(
            &self.name,
            (self.factory)(),
            r.plan_dir,
            r.resource_id,
            r.original,
        )))
    }

    fn open_backend(
        &self,
        _env: &Arc<Env>,
        record: Record,
        dir: PathBuf,
    ) -> Result<Box<dyn Backend>, SandboxError> {
        Ok(Box::new(CustomSandbox::open((self.factory)(), record, dir)))
    }
}

impl Default for StrategyRegistry {
    fn default() -> StrategyRegistry {
        let entries = builtins::builtins()
            .into_iter()
            .map(|(name, backend)| {
                let e = Entry {
                    backend,
                    protocol: None,
                    builtin: true,
                };
                (name.to_string(), e)
            })
            .collect();
        StrategyRegistry {
            allowed: RwLock::new(Vec::new()),
            entries: RwLock::new(entries),
        }
    }
}

impl StrategyRegistry {
    /// A registry of the built-in strategies only, that allows no module.
    pub fn new() -> StrategyRegistry {
        StrategyRegistry::default()
    }

    /// The registry of a manager that was given none: the built-in strategies only.
    pub fn builtin() -> &'static StrategyRegistry {
        static BUILTIN: OnceLock<StrategyRegistry> = OnceLock::new();
        BUILTIN.get_or_init(StrategyRegistry::new)
    }

    /// Allows modules under `prefix` (a directory; canonicalized, so a symlink or `..` in a
    /// module's path cannot lead out of it).
    pub fn allow_module_prefix(&self, prefix: impl AsRef<Path>) -> Result<(), RegistryError> {
        let p = prefix.as_ref();
        let canon = std::fs::canonicalize(p).map_err(|e| RegistryError::Load {
            module: p.to_path_buf(),
            reason: format!("allowed prefix cannot be resolved: {e}"),
        })?;
        self.allowed.write().push(canon);
        Ok(())
    }

    /// The allowed prefixes.
    pub fn allowed_prefixes(&self) -> Vec<PathBuf> {
        self.allowed.read().clone()
    }

    fn check_name(&self, name: &str) -> Result<(), RegistryError> {
        let dup = |reason: &str| RegistryError::Duplicate {
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
        if !ok {
            return Err(dup("use 1 to 64 of A-Z a-z 0-9 _ - ."));
        }
        if Strategy::from_name(name).is_ok() {
            return Err(dup("a built-in strategy has that name"));
        }
        if self.entries.read().contains_key(name) {
            return Err(dup("already registered"));
        }
        Ok(())
    }

    fn insert(&self, name: &str, entry: Entry) -> Result<(), RegistryError> {
        self.check_name(name)?;
        let mut entries = self.entries.write();
        if entries.contains_key(name) {
            return Err(RegistryError::Duplicate {
                name: name.to_string(),
                reason: "already registered".into(),
            });
        }
        entries.insert(name.to_string(), entry);
        Ok(())
    }

    /// Registers a strategy written in Rust: `factory` makes its [`Backend`]s, which the
    /// library runs under its own lifecycle, `commit_all`, checkpoints and recovery like the
    /// built-in ones. [`RegistryError::Duplicate`] when the name is a built-in's or taken.
    pub fn register_backend(
        &self,
        name: &str,
        factory: Arc<dyn BackendFactory>,
    ) -> Result<(), RegistryError> {
        self.insert(
            name,
            Entry {
                backend: factory,
                protocol: None,
                builtin: false,
            },
        )
    }

    /// Registers an in-process strategy: `factory` makes the protocol instance of each
    /// sandbox. [`RegistryError::Duplicate`] when the name is a built-in's or taken.
    pub fn register_factory(
        &self,
        name: &str,
        factory: StrategyFactory,
    ) -> Result<(), RegistryError> {
        let backend = Arc::new(ProtocolFactory {
            name: name.to_string(),
            factory: factory.clone(),
        });
        self.insert(
            name,
            Entry {
                backend,
                protocol: Some(factory),
                builtin: false,
            },
        )
    }

    /// Registers one instance that serves every sandbox of the strategy.
    pub fn register_instance(
        &self,
        name: &str,
        instance: Arc<dyn StrategyProtocol>,
    ) -> Result<(), RegistryError> {
        self.register_factory(name, Arc::new(move || instance.clone()))
    }

    /// Registers the strategy `class` of the shared library `module`: the library must be
    /// under an allowed prefix ([`RegistryError::NotAllowed`]), export
    /// `patchbox_strategy_<class>` ([`RegistryError::Load`]), and its table must have all nine
    /// operations ([`RegistryError::ProtocolMismatch`] naming the missing ones). See
    /// [`super::native`] for the C ABI.
    pub fn register(&self, name: &str, module: &Path, class: &str) -> Result<(), RegistryError> {
        self.check_name(name)?;
        let canon = self.allowed_module(module)?;
        let loaded = native::NativeModule::load(&canon, class, name)?;
        self.register_factory(name, Arc::new(move || loaded.instantiate()))
    }

    /// Registers every `(name, {module, class})` of a configuration; stops at the first
    /// error (those registered before it stay registered).
    pub fn register_all_from_config(
        &self,
        config: &BTreeMap<String, ModuleSpec>,
    ) -> Result<(), RegistryError> {
        for (name, spec) in config {
            self.register(name, &spec.module, &spec.class)?;
        }
        Ok(())
    }

    fn allowed_module(&self, module: &Path) -> Result<PathBuf, RegistryError> {
        let allowed = self.allowed.read().clone();
        let refused = || RegistryError::NotAllowed {
            module: module.to_path_buf(),
            allowed: allowed.clone(),
        };
        if allowed.is_empty() {
            return Err(refused());
        }
        // A module that cannot be resolved is refused as not allowed (nothing is loaded).
        let canon = std::fs::canonicalize(module).map_err(|_| refused())?;
        if allowed.iter().any(|p| canon.starts_with(p)) {
            Ok(canon)
        } else {
            Err(refused())
        }
    }

    /// Whether a custom strategy (not a built-in one) is registered under `name`.
    pub fn has_custom_strategy(&self, name: &str) -> bool {
        self.entries.read().get(name).is_some_and(|e| !e.builtin)
    }

    /// The factory of the strategy `name` (built-in or registered).
    pub fn backend_factory(&self, name: &str) -> Option<Arc<dyn BackendFactory>> {
        self.entries.read().get(name).map(|e| e.backend.clone())
    }

    /// A protocol instance of the strategy `name` (made by its factory), for a strategy
    /// registered by protocol.
    pub fn get_custom_strategy(
        &self,
        name: &str,
    ) -> Result<Arc<dyn StrategyProtocol>, RegistryError> {
        let f = self
            .entries
            .read()
            .get(name)
            .and_then(|e| e.protocol.clone());
        match f {
            Some(f) => Ok(f()),
            None => Err(RegistryError::Unknown {
                name: name.to_string(),
                known: self.names(),
            }),
        }
    }

    /// The names of the custom strategies registered, sorted (the built-in ones are not
    /// listed).
    pub fn names(&self) -> Vec<String> {
        self.entries
            .read()
            .iter()
            .filter(|(_, e)| !e.builtin)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// The factory of `name` in the manager's `registry` (the built-in registry when it has
/// none); [`SandboxError::Sandbox`] naming the built-in and registered strategies when
/// there is no such strategy.
fn factory_of(
    registry: Option<&StrategyRegistry>,
    name: &str,
) -> Result<Arc<dyn BackendFactory>, SandboxError> {
    let reg = registry.unwrap_or_else(|| StrategyRegistry::builtin());
    reg.backend_factory(name).ok_or_else(|| {
        SandboxError::sandbox(
            None,
            format!(
                "unknown sandbox strategy {name:?} (built-in: none, copy_on_write, overlay, git_worktree, transaction_rollback; registered: [{}]{})",
                reg.names().join(", "),
                if registry.is_none() { "; the manager has no strategy registry" } else { "" }
            ),
        )
    })
}

/// A new pending sandbox of `strategy`, made by its factory in `registry`.
pub fn new_sandbox(
    registry: Option<&StrategyRegistry>,
    strategy: &Strategy,
    env: &Arc<Env>,
    plan_dir: &Path,
    resource_id: &str,
    original: &Path,
) -> Result<Arc<dyn Sandbox>, SandboxError> {
    let backend = factory_of(registry, strategy.name())?.new_backend(&NewBackend {
        env,
        strategy,
        plan_dir,
        resource_id,
        original,
    })?;
    Ok(Arc::new(SandboxHandle::new(backend)))
}

/// A sandbox found on disk, opened by the factory of its recorded strategy.
pub fn open_sandbox(
    registry: Option<&StrategyRegistry>,
    env: &Arc<Env>,
    record: Record,
    dir: PathBuf,
) -> Result<Arc<dyn Sandbox>, SandboxError> {
    let f = factory_of(registry, record.strategy.name())?;
    Ok(Arc::new(SandboxHandle::new(
        f.open_backend(env, record, dir)?,
    )))
}
