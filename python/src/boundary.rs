//! `Resource` and `ResourceRegistry`: a plan's resources, and which sandbox each belongs to
//! (its boundary: the enclosing repository, else its outermost declared directory, else
//! itself), for `SandboxManager.get_or_create_sandbox_for_resource`.
//!
//! Why: resources under one boundary must share one sandbox, or two sandboxes of one
//! repository would commit over each other. Invariants: the registry is the Rust
//! `ResourceRegistry` behind a mutex (shareable between threads); a resource's parent must
//! be added before it.

use std::path::PathBuf;

use parking_lot::Mutex;
use pyo3::prelude::*;

use patchbox::plan::{Resource as RsResource, ResourceKind, ResourceRegistry as RsRegistry};

use crate::errors::plan_err;
use crate::plan_model::{path_str, strategy_arg};

/// A resource of a plan: `kind` is `"git_repository"`, `"directory"`, `"file"`,
/// `"database"` or any other name; `sandbox_strategy` the strategy of its sandbox when it
/// is a boundary (default: `git_worktree` for a repository, `copy_on_write` otherwise).
#[pyclass(frozen, module = "patchbox._native")]
#[derive(Clone)]
pub struct Resource {
    pub(crate) inner: RsResource,
}

fn kind_of(name: &str) -> ResourceKind {
    match name {
        "git_repository" => ResourceKind::GitRepository,
        "directory" => ResourceKind::Directory,
        "file" => ResourceKind::File,
        "database" => ResourceKind::Database,
        other => ResourceKind::Other(other.to_string()),
    }
}

fn kind_name(k: &ResourceKind) -> &str {
    match k {
        ResourceKind::GitRepository => "git_repository",
        ResourceKind::Directory => "directory",
        ResourceKind::File => "file",
        ResourceKind::Database => "database",
        ResourceKind::Other(o) => o,
    }
}

#[pymethods]
impl Resource {
    #[new]
    #[pyo3(signature = (resource_id, kind, path, parent=None, sandbox_strategy=None))]
    fn py_new(
        resource_id: &str,
        kind: &str,
        path: PathBuf,
        parent: Option<&str>,
        sandbox_strategy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Resource> {
        let mut r = RsResource::new(resource_id, kind_of(kind), path);
        if let Some(p) = parent {
            r = r.with_parent(p);
        }
        if let Some(s) = sandbox_strategy {
            r = r.with_strategy(strategy_arg(s)?);
        }
        Ok(Resource { inner: r })
    }

    #[getter]
    fn resource_id(&self) -> &str {
        &self.inner.id
    }

    /// The same as `resource_id`.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    #[getter]
    fn kind(&self) -> &str {
        kind_name(&self.inner.kind)
    }

    #[getter]
    fn path(&self) -> String {
        path_str(&self.inner.path)
    }

    #[getter]
    fn parent(&self) -> Option<&str> {
        self.inner.parent.as_deref()
    }

    /// The strategy of its sandbox when it is a boundary.
    #[getter]
    fn sandbox_strategy(&self) -> String {
        self.inner.boundary_strategy().name().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "Resource(resource_id={:?}, kind={:?}, path={:?})",
            self.inner.id,
            kind_name(&self.inner.kind),
            path_str(&self.inner.path)
        )
    }
}

/// The resources of a plan, by id.
#[pyclass(frozen, module = "patchbox._native")]
pub struct ResourceRegistry {
    pub(crate) inner: Mutex<RsRegistry>,
}

#[pymethods]
impl ResourceRegistry {
    /// An empty registry, or one holding `resources` (added in order: parents first).
    #[new]
    #[pyo3(signature = (resources=None))]
    fn py_new(resources: Option<Vec<Resource>>) -> PyResult<ResourceRegistry> {
        let mut reg = RsRegistry::new();
        for r in resources.unwrap_or_default() {
            reg.add(r.inner).map_err(plan_err)?;
        }
        Ok(ResourceRegistry {
            inner: Mutex::new(reg),
        })
    }

    /// Adds a resource; a taken id or an unknown parent raises `SandboxError`.
    fn add(&self, resource: &Resource) -> PyResult<()> {
        self.inner
            .lock()
            .add(resource.inner.clone())
            .map_err(plan_err)
    }

    /// The resource `resource_id`, or `None`.
    fn get(&self, resource_id: &str) -> Option<Resource> {
        self.inner
            .lock()
            .get(resource_id)
            .map(|r| Resource { inner: r.clone() })
    }

    /// The id of the boundary resource `resource_id` belongs to.
    fn resolve_boundary(&self, resource_id: &str) -> PyResult<String> {
        self.inner
            .lock()
            .resolve_boundary(resource_id)
            .map_err(plan_err)
    }

    fn __len__(&self) -> usize {
        self.inner.lock().iter().count()
    }
}

impl ResourceRegistry {
    /// A copy of the registry now (the manager's calls work on it without the lock).
    pub(crate) fn snapshot(&self) -> RsRegistry {
        self.inner.lock().clone()
    }
}
