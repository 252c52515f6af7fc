//! The C++ plan `SandboxManager`'s Rust half: [`PlanMgr`] holds a [`PlanManager`] until the
//! C++ object closes it, and runs each of its operations under `catch_unwind`, with errors in
//! the plan encoding. The list of a plan's sandboxes handed to C++ is here too.

use std::os::unix::ffi::OsStringExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::bridge;
use super::convert::{bytes, registry_in, result_out};
use super::custom::CppStrategy;
use super::error::{encode, plan};
use super::sandbox::{boxed, PlanSandbox};
use crate::ffi::{guarded, guarded_or_default, internal, path_from};
use crate::plan::custom::StrategyRegistry;
use crate::plan::{PlanManager, Resource, ResourceRegistry, Sandbox, SandboxError, Strategy};

/// The C++ plan `SandboxManager`'s Rust half: the manager, until its `close` drops it.
pub struct PlanMgr {
    pub(super) inner: Option<PlanManager>,
}

/// The sandboxes of a plan, handed to C++ one by one.
pub struct PlanSandboxList {
    items: Vec<Arc<dyn Sandbox>>,
}

pub(super) fn plan_open(root: &[u8]) -> Result<Box<PlanMgr>, String> {
    guarded(|| {
        let mgr = plan(if root.is_empty() {
            PlanManager::open_default()
        } else {
            PlanManager::open(path_from(root))
        })?;
        // Every C++ manager has a registry, for SandboxManager::register_strategy.
        mgr.set_registry(Arc::new(StrategyRegistry::new()));
        Ok(Box::new(PlanMgr { inner: Some(mgr) }))
    })
}

impl PlanMgr {
    fn get(&self) -> Result<&PlanManager, String> {
        self.inner
            .as_ref()
            .ok_or_else(|| internal("the plan sandbox manager is closed"))
    }

    pub(super) fn root(&self) -> Vec<u8> {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|m| m.root().as_os_str().to_owned().into_vec())
                .unwrap_or_default()
        })
    }

    pub(super) fn get_or_create_sandbox(
        &self,
        plan_id: &str,
        resource_id: &str,
        original_path: &[u8],
        strategy: &str,
    ) -> Result<Box<PlanSandbox>, String> {
        guarded(|| {
            let strategy = Strategy::parse(strategy);
            let sb = plan(self.get()?.get_or_create_sandbox(
                plan_id,
                resource_id,
                path_from(original_path),
                strategy,
            ))?;
            Ok(boxed(sb))
        })
    }

    pub(super) fn get_sandbox(
        &self,
        plan_id: &str,
        resource_id: &str,
    ) -> Result<Box<PlanSandbox>, String> {
        guarded(|| {
            Ok(Box::new(PlanSandbox {
                inner: self.get()?.get_sandbox(plan_id, resource_id),
            }))
        })
    }

    pub(super) fn list_sandboxes(&self, plan_id: &str) -> Result<Box<PlanSandboxList>, String> {
        guarded(|| {
            Ok(Box::new(PlanSandboxList {
                items: self.get()?.list_sandboxes(plan_id),
            }))
        })
    }

    pub(super) fn list_plans(&self) -> Result<Vec<String>, String> {
        guarded(|| Ok(self.get()?.list_plans()))
    }

    pub(super) fn plans_json(&self, has_plan: bool, plan_id: &str) -> Result<String, String> {
        guarded(|| {
            let recs = crate::records::plan_records(self.get()?, has_plan.then_some(plan_id));
            Ok(crate::records::to_json(&recs))
        })
    }

    pub(super) fn diff_json(&self, plan_id: &str) -> Result<String, String> {
        guarded(|| {
            let recs = plan(crate::records::plan_diff_records(self.get()?, plan_id))?;
            Ok(crate::records::to_json(&recs))
        })
    }

    pub(super) fn commit_all(&self, plan_id: &str) -> Result<Vec<bridge::FfiCommitResult>, String> {
        guarded(|| {
            let results = plan(self.get()?.commit_all(plan_id))?;
            Ok(results.into_iter().map(result_out).collect())
        })
    }

    pub(super) fn commit_all_as(
        &self,
        plan_id: &str,
        p: &bridge::FfiCommitProvenance,
    ) -> Result<Vec<bridge::FfiCommitResult>, String> {
        let provenance = crate::session::provenance::Provenance {
            command: p.command.clone(),
            cwd: p
                .has_cwd
                .then(|| String::from_utf8_lossy(&p.cwd).into_owned()),
            exit_status: p.has_exit_status.then_some(p.exit_status),
            started_ms: p.has_started.then_some(p.started_ms),
            ended_ms: p.has_ended.then_some(p.ended_ms),
        };
        guarded(|| {
            let results = plan(self.get()?.commit_all_as(plan_id, &provenance))?;
            Ok(results.into_iter().map(result_out).collect())
        })
    }

    pub(super) fn rollback_all(&self, plan_id: &str) -> Result<(), String> {
        guarded(|| plan(self.get()?.rollback_all(plan_id)))
    }

    pub(super) fn cleanup_all(&self, plan_id: &str) -> Result<(), String> {
        guarded(|| plan(self.get()?.cleanup_all(plan_id)))
    }

    pub(super) fn cleanup_abandoned(&self) -> Result<usize, String> {
        guarded(|| plan(self.get()?.cleanup_abandoned()))
    }

    fn resource<'a>(reg: &'a ResourceRegistry, id: &str) -> Result<&'a Resource, String> {
        reg.get(id).ok_or_else(|| {
            encode(&SandboxError::sandbox(
                None,
                format!("unknown resource {id:?}"),
            ))
        })
    }

    pub(super) fn resolve_sandbox_key(
        &self,
        resource_id: &str,
        registry: &[bridge::FfiResource],
    ) -> Result<String, String> {
        guarded(|| {
            let reg = plan(registry_in(registry))?;
            let r = Self::resource(&reg, resource_id)?;
            plan(self.get()?.resolve_sandbox_key(r, &reg))
        })
    }

    pub(super) fn get_or_create_sandbox_for_resource(
        &self,
        plan_id: &str,
        resource_id: &str,
        registry: &[bridge::FfiResource],
        prefix: &mut Vec<u8>,
    ) -> Result<Box<PlanSandbox>, String> {
        guarded(|| {
            let reg = plan(registry_in(registry))?;
            let r = Self::resource(&reg, resource_id)?;
            let view = plan(
                self.get()?
                    .get_or_create_sandbox_for_resource(plan_id, r, &reg),
            )?;
            *prefix = bytes(view.prefix);
            Ok(boxed(view.sandbox))
        })
    }

    pub(super) fn register_strategy(
        &self,
        name: &str,
        strategy: cxx::UniquePtr<bridge::CustomStrategyHandle>,
    ) -> Result<(), String> {
        guarded(|| {
            let mgr = self.get()?;
            if strategy.is_null() {
                return Err(encode(&SandboxError::sandbox(
                    None,
                    format!("register_strategy({name:?}): no strategy"),
                )));
            }
            let registry = mgr
                .registry()
                .ok_or_else(|| internal("the plan sandbox manager has no registry"))?;
            registry
                .register_instance(name, Arc::new(CppStrategy { handle: strategy }))
                .map_err(|e| encode(&SandboxError::sandbox(None, e.to_string())))?;
            mgr.reopen_custom();
            Ok(())
        })
    }

    pub(super) fn has_custom_strategy(&self, name: &str) -> bool {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .and_then(|m| m.registry())
                .is_some_and(|r| r.has_custom_strategy(name))
        })
    }

    pub(super) fn clear_boundary_cache(&self) {
        guarded_or_default(|| {
            if let Some(m) = self.inner.as_ref() {
                m.clear_boundary_cache();
            }
        })
    }

    /// Drops the manager now (the Rust `Drop`: sandboxes without work cleaned up), so the
    /// C++ destructor runs it under `catch_unwind`. Idempotent.
    pub(super) fn close(&mut self) {
        let inner = self.inner.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(inner)));
    }
}

impl PlanSandboxList {
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn get(&self, i: usize) -> Box<PlanSandbox> {
        Box::new(PlanSandbox {
            inner: self.items.get(i).cloned(),
        })
    }
}
