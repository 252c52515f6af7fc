//! Sandboxes by resource: every resource under one boundary (see [`crate::plan::boundary`])
//! shares its boundary's sandbox, seen through a [`ResourceSandbox`] that maps the
//! resource's paths into it. The boundary of each resource is cached.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::PlanManager;
use crate::id::{IntoId, PlanId};
use crate::plan::boundary::{Resource, ResourceRegistry};
use crate::plan::error::SandboxError;
use crate::plan::sandbox::Sandbox;

impl PlanManager {
    /// The boundary key of `resource` (the id of the resource whose sandbox it shares), cached
    /// until [`PlanManager::clear_boundary_cache`].
    pub fn resolve_sandbox_key(
        &self,
        resource: &Resource,
        registry: &ResourceRegistry,
    ) -> Result<String, SandboxError> {
        if let Some(k) = self.boundaries.lock().get(&resource.id) {
            return Ok(k.clone());
        }
        let k = registry.resolve_boundary(&resource.id)?;
        self.boundaries
            .lock()
            .insert(resource.id.clone(), k.clone());
        Ok(k)
    }

    /// The sandbox of the boundary `resource` belongs to, shared by every resource under that
    /// boundary; the returned view's `get_path` maps resource-relative paths into it.
    pub fn get_or_create_sandbox_for_resource(
        &self,
        plan_id: impl IntoId<PlanId>,
        resource: &Resource,
        registry: &ResourceRegistry,
    ) -> Result<ResourceSandbox, SandboxError> {
        let key = self.resolve_sandbox_key(resource, registry)?;
        let boundary = registry.get(&key).ok_or_else(|| {
            SandboxError::sandbox(None, format!("unknown boundary resource {key:?}"))
        })?;
        let sandbox = self.get_or_create_sandbox(
            plan_id,
            &boundary.id,
            &boundary.path,
            boundary.boundary_strategy(),
        )?;
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let prefix = canon(&resource.path)
            .strip_prefix(canon(&boundary.path))
            .map(Path::to_path_buf)
            .map_err(|_| {
                SandboxError::sandbox(
                    None,
                    format!(
                        "resource {:?} at {} is not under its boundary {} at {}",
                        resource.id,
                        resource.path.display(),
                        boundary.id,
                        boundary.path.display()
                    ),
                )
            })?;
        Ok(ResourceSandbox { sandbox, prefix })
    }

    /// Drops the boundary cache (call when the resource registry changes).
    pub fn clear_boundary_cache(&self) {
        self.boundaries.lock().clear();
    }
}

/// A resource's view of its boundary's sandbox.
#[derive(Clone)]
pub struct ResourceSandbox {
    /// The boundary's sandbox.
    pub sandbox: Arc<dyn Sandbox>,
    /// The resource's place under its boundary.
    pub prefix: PathBuf,
}

impl ResourceSandbox {
    /// Where `resource_relative` (relative to the resource) lives in the sandbox.
    pub fn get_path(&self, resource_relative: impl AsRef<Path>) -> Result<PathBuf, SandboxError> {
        self.sandbox
            .get_path(&self.prefix.join(resource_relative.as_ref()))
    }
}
