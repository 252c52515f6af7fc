//! The C++ `patchbox::plan::SandboxStrategyRegistry`'s Rust half: a shared
//! [`StrategyRegistry`] (strategies by name, shared libraries loaded only from allowed
//! prefixes), and the managers opened over it.
//!
//! Why its own file: the registry is the documented object a host configures once
//! (`allowed_prefixes`, `register`, `register_all_from_config`) and hands to its managers;
//! the plan bridge only declares these functions. Invariants: a registry's errors cross with
//! the plan bridge's encoding (`plan_<kind>` and four detail fields), a protocol mismatch as
//! kind `protocol_mismatch` with the missing operations in the files field, every other
//! refusal (not allowed, cannot load, name taken) as `sandbox`; no panic crosses (every
//! function runs under [`guarded`]).

use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use super::bridge;
use super::custom::CppStrategy;
use super::error::{encode, plan, DETAIL_SEPARATOR};
use super::manager::PlanMgr;
use crate::ffi::{guarded, guarded_or_default, path_from, KIND_SEPARATOR};
use crate::plan::custom::{RegistryError, StrategyRegistry};
use crate::plan::{PlanManager, SandboxError};

/// The registry handed to C++ (every copy of the C++ object shares it).
pub struct PlanRegistry {
    inner: Arc<StrategyRegistry>,
}

/// A registry error in the plan bridge's encoding (see the module docs).
fn registry_err(e: RegistryError) -> String {
    match &e {
        RegistryError::ProtocolMismatch { missing, .. } => format!(
            "plan_protocol_mismatch{KIND_SEPARATOR}{e}{d}{d}{files}{d}{d}",
            d = DETAIL_SEPARATOR,
            files = missing.join(&KIND_SEPARATOR.to_string()),
        ),
        _ => encode(&SandboxError::sandbox(None, e.to_string())),
    }
}

/// An empty registry that allows no module.
pub fn plan_registry_new() -> Box<PlanRegistry> {
    Box::new(PlanRegistry {
        inner: Arc::new(StrategyRegistry::new()),
    })
}

/// The manager of `root` (empty: the default root) using `registry`'s strategies.
pub fn plan_open_with_registry(
    root: &[u8],
    registry: &PlanRegistry,
) -> Result<Box<PlanMgr>, String> {
    guarded(|| {
        let mgr = plan(if root.is_empty() {
            PlanManager::open_default()
        } else {
            PlanManager::open(path_from(root))
        })?;
        mgr.set_registry(registry.inner.clone());
        Ok(Box::new(PlanMgr { inner: Some(mgr) }))
    })
}

impl PlanRegistry {
    pub(super) fn allow_module_prefix(&self, prefix: &[u8]) -> Result<(), String> {
        guarded(|| {
            self.inner
                .allow_module_prefix(path_from(prefix))
                .map_err(registry_err)
        })
    }

    pub(super) fn allowed_prefixes(&self) -> Vec<u8> {
        guarded_or_default(|| {
            let mut out = Vec::new();
            for p in self.inner.allowed_prefixes() {
                out.extend_from_slice(p.as_os_str().as_bytes());
                out.push(0);
            }
            out
        })
    }

    pub(super) fn register_module(
        &self,
        name: &str,
        module: &[u8],
        class_name: &str,
    ) -> Result<(), String> {
        guarded(|| {
            self.inner
                .register(name, &path_from(module), class_name)
                .map_err(registry_err)
        })
    }

    pub(super) fn register_strategy(
        &self,
        name: &str,
        strategy: cxx::UniquePtr<bridge::CustomStrategyHandle>,
    ) -> Result<(), String> {
        guarded(|| {
            if strategy.is_null() {
                return Err(encode(&SandboxError::sandbox(
                    None,
                    format!("register_strategy({name:?}): no strategy"),
                )));
            }
            self.inner
                .register_instance(name, Arc::new(CppStrategy { handle: strategy }))
                .map_err(registry_err)
        })
    }

    pub(super) fn has_custom_strategy(&self, name: &str) -> bool {
        guarded_or_default(|| self.inner.has_custom_strategy(name))
    }

    pub(super) fn names(&self) -> Vec<String> {
        guarded_or_default(|| self.inner.names())
    }
}
