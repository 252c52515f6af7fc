//! The registry of custom strategies: in-process factories, and shared libraries loaded only
//! from allowed prefixes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

pub use super::error::RegistryError;
use super::native;
use super::protocol::StrategyProtocol;
use crate::plan::model::Strategy;

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

/// The custom strategies a [`PlanManager`](crate::plan::PlanManager) can make sandboxes of.
/// `Send + Sync`; share it as `Arc<StrategyRegistry>`.
///
/// Strategies come from the host process ([`StrategyRegistry::register_factory`],
/// [`StrategyRegistry::register_instance`], the C++ `SandboxManager::register_strategy`) or
/// from a shared library ([`StrategyRegistry::register`]), which is loaded only when its
/// canonical path is under a prefix the host allowed. None is allowed by default: a registry
/// loads no code unless the host says where from.
#[derive(Default)]
pub struct StrategyRegistry {
    allowed: RwLock<Vec<PathBuf>>,
    factories: RwLock<BTreeMap<String, StrategyFactory>>,
}

impl StrategyRegistry {
    /// An empty registry that allows no module.
    pub fn new() -> StrategyRegistry {
        StrategyRegistry::default()
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
        if self.factories.read().contains_key(name) {
            return Err(dup("already registered"));
        }
        Ok(())
    }

    /// Registers an in-process strategy: `factory` makes the protocol instance of each
    /// sandbox. [`RegistryError::Duplicate`] when the name is a built-in's or taken.
    pub fn register_factory(
        &self,
        name: &str,
        factory: StrategyFactory,
    ) -> Result<(), RegistryError> {
        self.check_name(name)?;
        let mut f = self.factories.write();
        if f.contains_key(name) {
            return Err(RegistryError::Duplicate {
                name: name.to_string(),
                reason: "already registered".into(),
            });
        }
        f.insert(name.to_string(), factory);
        Ok(())
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

    /// Whether a strategy is registered under `name`.
    pub fn has_custom_strategy(&self, name: &str) -> bool {
        self.factories.read().contains_key(name)
    }

    /// A protocol instance of the strategy `name` (made by its factory).
    pub fn get_custom_strategy(
        &self,
        name: &str,
    ) -> Result<Arc<dyn StrategyProtocol>, RegistryError> {
        let f = self.factories.read().get(name).cloned();
        match f {
            Some(f) => Ok(f()),
            None => Err(RegistryError::Unknown {
                name: name.to_string(),
                known: self.names(),
            }),
        }
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.factories.read().keys().cloned().collect()
    }
}
