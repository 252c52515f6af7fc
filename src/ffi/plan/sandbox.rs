//! One plan sandbox handed to C++: [`PlanSandbox`] holds the `Arc<dyn Sandbox>` (or none, when
//! a lookup found nothing) that the C++ built-in `patchbox::plan::Sandbox` wraps, and runs its
//! operations under `catch_unwind`, with errors in the plan encoding.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::bridge;
use super::convert::{bytes, context_out, diff_out, empty_context, result_out};
use super::error::plan;
use crate::ffi::{guarded, guarded_or_default, internal, path_from};
use crate::id::PlanId;
use crate::plan::{Sandbox, SandboxError};

/// One sandbox handed to C++ (none: `get_sandbox` found nothing).
pub struct PlanSandbox {
    pub(super) inner: Option<Arc<dyn Sandbox>>,
}

pub(super) fn boxed(sb: Arc<dyn Sandbox>) -> Box<PlanSandbox> {
    Box::new(PlanSandbox { inner: Some(sb) })
}

impl PlanSandbox {
    pub(super) fn sb(&self) -> Result<&Arc<dyn Sandbox>, String> {
        self.inner
            .as_ref()
            .ok_or_else(|| internal("no such plan sandbox"))
    }

    pub(super) fn is_some(&self) -> bool {
        self.inner.is_some()
    }

    pub(super) fn sandbox_id(&self) -> String {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|s| s.sandbox_id().to_string())
                .unwrap_or_default()
        })
    }

    pub(super) fn strategy(&self) -> String {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|s| s.strategy().name().to_string())
                .unwrap_or_default()
        })
    }

    pub(super) fn status(&self) -> String {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|s| s.status().name().to_string())
                .unwrap_or_default()
        })
    }

    pub(super) fn context(&self) -> bridge::FfiPlanContextOpt {
        let ctx = catch_unwind(AssertUnwindSafe(|| {
            self.inner.as_ref().and_then(|s| s.context())
        }))
        .ok()
        .flatten();
        match ctx {
            Some(c) => bridge::FfiPlanContextOpt {
                present: true,
                context: context_out(c),
            },
            None => bridge::FfiPlanContextOpt {
                present: false,
                context: empty_context(),
            },
        }
    }

    pub(super) fn create(&self, plan_id: &str) -> Result<bridge::FfiPlanContext, String> {
        guarded(|| {
            let sb = self.sb()?;
            // Parsed here, at the boundary, with the plan layer's message for a bad id.
            let plan_id = plan(PlanId::parse(plan_id).map_err(SandboxError::from))?;
            Ok(context_out(plan(sb.create(&plan_id))?))
        })
    }

    pub(super) fn get_path(&self, resource_relative: &[u8]) -> Result<Vec<u8>, String> {
        guarded(|| {
            Ok(bytes(plan(
                self.sb()?.get_path(&path_from(resource_relative)),
            )?))
        })
    }

    pub(super) fn read(
        &self,
        resource_relative: &[u8],
        found: &mut bool,
    ) -> Result<Vec<u8>, String> {
        guarded(|| {
            let d = plan(self.sb()?.read(&path_from(resource_relative)))?;
            *found = d.is_some();
            Ok(d.unwrap_or_default())
        })
    }

    pub(super) fn write(&self, resource_relative: &[u8], data: &[u8]) -> Result<(), String> {
        guarded(|| plan(self.sb()?.write(&path_from(resource_relative), data)))
    }

    pub(super) fn diff(&self) -> Result<bridge::FfiDiff, String> {
        guarded(|| Ok(diff_out(plan(self.sb()?.diff())?)))
    }

    pub(super) fn check_commit(&self) -> Result<(), String> {
        guarded(|| plan(self.sb()?.check_commit()))
    }

    pub(super) fn commit(
        &self,
        has_message: bool,
        message: &str,
    ) -> Result<bridge::FfiCommitResult, String> {
        guarded(|| {
            let r = plan(self.sb()?.commit(has_message.then_some(message)))?;
            Ok(result_out(r))
        })
    }

    pub(super) fn rollback(&self) -> Result<(), String> {
        guarded(|| plan(self.sb()?.rollback()))
    }

    pub(super) fn cleanup(&self) -> Result<(), String> {
        guarded(|| plan(self.sb()?.cleanup()))
    }

    pub(super) fn is_rollbackable(&self) -> bool {
        guarded_or_default(|| self.inner.as_ref().is_some_and(|s| s.is_rollbackable()))
    }
}
