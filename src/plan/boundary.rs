//! Boundaries: which sandbox a resource belongs to.
//!
//! A plan names many resources (a repository, a directory in it, a file in that); writes to
//! resources under one boundary must land in one sandbox, or two sandboxes of one repository
//! would commit over each other. The boundary of a resource is the nearest enclosing
//! repository resource (by parent links, else by path), else its outermost declared directory
//! ancestor, else the resource itself.
//!
//! ```
//! use patchbox::plan::{Resource, ResourceKind, ResourceRegistry};
//! let mut reg = ResourceRegistry::new();
//! reg.add(Resource::new("repo", ResourceKind::GitRepository, "/src/app")).unwrap();
//! reg.add(Resource::new("docs", ResourceKind::Directory, "/src/app/docs").with_parent("repo")).unwrap();
//! reg.add(Resource::new("readme", ResourceKind::File, "/src/app/README.md")).unwrap();
//! assert_eq!(reg.resolve_boundary("docs").unwrap(), "repo");
//! assert_eq!(reg.resolve_boundary("readme").unwrap(), "repo"); // by path
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::SandboxError;
use super::model::Strategy;

/// What a resource is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResourceKind {
    /// A git repository (its work tree).
    GitRepository,
    /// A directory.
    Directory,
    /// A single file.
    File,
    /// A database file.
    Database,
    /// Anything else (an external service…).
    Other(String),
}

/// A resource of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Its id.
    pub id: String,
    /// What it is.
    pub kind: ResourceKind,
    /// Where it is.
    pub path: PathBuf,
    /// The resource it belongs to, if declared.
    pub parent: Option<String>,
    /// The strategy its sandbox uses when it is a boundary (default: `git_worktree` for a
    /// repository, `copy_on_write` for a directory or file).
    pub strategy: Option<Strategy>,
}

impl Resource {
    /// A resource without parent or strategy.
    pub fn new(id: &str, kind: ResourceKind, path: impl Into<PathBuf>) -> Resource {
        Resource {
            id: id.to_string(),
            kind,
            path: path.into(),
            parent: None,
            strategy: None,
        }
    }

    /// The same with a parent link.
    pub fn with_parent(mut self, parent: &str) -> Resource {
        self.parent = Some(parent.to_string());
        self
    }

    /// The same with a strategy.
    pub fn with_strategy(mut self, s: Strategy) -> Resource {
        self.strategy = Some(s);
        self
    }

    /// The strategy of a sandbox whose boundary is this resource.
    pub fn boundary_strategy(&self) -> Strategy {
        self.strategy.clone().unwrap_or(match self.kind {
            ResourceKind::GitRepository => Strategy::GitWorktree,
            _ => Strategy::CopyOnWrite,
        })
    }
}

/// The resources of a plan, by id.
#[derive(Clone, Debug, Default)]
pub struct ResourceRegistry {
    resources: BTreeMap<String, Resource>,
}

impl ResourceRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a resource; an id already present, or a parent link to an unknown resource, is
    /// refused.
    pub fn add(&mut self, r: Resource) -> Result<(), SandboxError> {
        if r.id.is_empty() {
            return Err(SandboxError::sandbox(None, "a resource needs an id"));
        }
        if self.resources.contains_key(&r.id) {
            return Err(SandboxError::sandbox(
                None,
                format!("resource {:?} is already registered", r.id),
            ));
        }
        if let Some(p) = &r.parent {
            if !self.resources.contains_key(p) {
                return Err(SandboxError::sandbox(
                    None,
                    format!("resource {:?}: unknown parent {p:?}", r.id),
                ));
            }
        }
        self.resources.insert(r.id.clone(), r);
        Ok(())
    }

    /// The resource `id`.
    pub fn get(&self, id: &str) -> Option<&Resource> {
        self.resources.get(id)
    }

    /// Every resource, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Resource> {
        self.resources.values()
    }

    /// The id of the boundary resource `id` belongs to (see the module docs).
    pub fn resolve_boundary(&self, id: &str) -> Result<String, SandboxError> {
        let r = self
            .get(id)
            .ok_or_else(|| SandboxError::sandbox(None, format!("unknown resource {id:?}")))?;
        let mut chain = vec![r];
        let mut cur = r;
        while let Some(p) = cur.parent.as_deref() {
            let Some(next) = self.get(p) else { break };
            if chain.iter().any(|c| c.id == next.id) || chain.len() > self.resources.len() {
                return Err(SandboxError::sandbox(
                    None,
                    format!("resource {id:?}: parent links form a cycle"),
                ));
            }
            chain.push(next);
            cur = next;
        }
        if let Some(repo) = chain.iter().find(|c| c.kind == ResourceKind::GitRepository) {
            return Ok(repo.id.clone());
        }
        // Not linked to a repository: the innermost registered repository holding its path.
        let by_path = self
            .resources
            .values()
            .filter(|c| c.kind == ResourceKind::GitRepository && contains(&c.path, &r.path))
            .max_by_key(|c| c.path.components().count());
        if let Some(repo) = by_path {
            return Ok(repo.id.clone());
        }
        if let Some(dir) = chain
            .iter()
            .rev()
            .find(|c| c.kind == ResourceKind::Directory)
        {
            return Ok(dir.id.clone());
        }
        Ok(r.id.clone())
    }
}

fn contains(outer: &Path, inner: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    canon(inner).starts_with(canon(outer))
}
