//! Plan sandboxes: every write of a plan's Execute phase goes to a sandbox per resource, so
//! the Apply phase can review a diff, roll back, or commit every sandbox of the plan all or
//! nothing.
//!
//! ```
//! use patchbox::plan::{Manager, Status, Strategy};
//! # fn main() -> Result<(), patchbox::plan::SandboxError> {
//! let root = tempfile::tempdir().unwrap();     // the library's root (never the project)
//! let project = tempfile::tempdir().unwrap();  // the user's files
//! std::fs::write(project.path().join("notes.txt"), "one\n").unwrap();
//!
//! let mgr = Manager::open(root.path())?;
//! let sb = mgr.get_or_create_sandbox("plan-1", "docs", project.path(), Strategy::CopyOnWrite)?;
//! std::fs::write(sb.get_path("notes.txt".as_ref())?, "two\n").unwrap(); // the actor writes here
//! assert_eq!(std::fs::read_to_string(project.path().join("notes.txt")).unwrap(), "one\n");
//!
//! let diff = sb.diff()?;                        // review: per file, and as a git patch
//! assert_eq!(diff.entries[0].path, "notes.txt");
//! let results = mgr.commit_all("plan-1")?;      // all or nothing, through the 3-way apply
//! assert!(results[0].success);
//! assert_eq!(std::fs::read_to_string(project.path().join("notes.txt")).unwrap(), "two\n");
//! assert_eq!(sb.status(), Status::Committed);
//! sb.rollback()?;                               // after commit: the undo of the commit
//! assert_eq!(std::fs::read_to_string(project.path().join("notes.txt")).unwrap(), "one\n");
//! mgr.cleanup_all("plan-1")?;
//! # Ok(()) }
//! ```
//!
//! The README's example (a test keeps the two identical):
//!
//! ```rust,no_run
//! use patchbox::plan::{Manager, Strategy};
//!
//! fn main() -> Result<(), patchbox::plan::SandboxError> {
//!     let mgr = Manager::open("/home/me/.entropic/sandbox")?; // state under <root>/plans
//!     let sb = mgr.get_or_create_sandbox("plan-1", "docs", "/home/me/project", Strategy::CopyOnWrite)?;
//!     std::fs::write(sb.get_path("notes.txt".as_ref())?, "two\n").unwrap(); // the actor writes here
//!     let diff = sb.diff()?;                  // per file (before/after) and as a git patch
//!     println!("{}", String::from_utf8_lossy(&diff.patch));
//!     let results = mgr.commit_all("plan-1")?; // all or nothing, through the 3-way apply
//!     println!("{} committed", results.len());
//!     sb.rollback()?;                         // after commit: undo the commit
//!     mgr.cleanup_all("plan-1")
//! }
//! ```
//!
//! | file | owns |
//! |---|---|
//! | [`status`] | the lifecycle and its transition table |
//! | [`error`] | [`SandboxError`], the users' exception hierarchy |
//! | [`model`] | strategies, contexts, commit results, diffs |
//! | [`sandbox`] | the [`Sandbox`] trait: what the manager and the bridges hold |
//! | [`backend`] | the [`Backend`] trait a strategy implements, and its optional capabilities |
//! | [`handle`] | [`SandboxHandle`]: the lifecycle every strategy shares, over a backend |
//! | [`record`] | a sandbox's state on disk, and the lifecycle guard |
//! | [`strategy`] | the built-in strategies |
//! | [`manager`] | [`Manager`] (also [`PlanManager`]): lazy creation, `commit_all`, cleanup, recovery |
//! | [`own_snapshot`] | when a plan's later sandboxes reuse the snapshot its first one took |
//! | [`journal`] | the journal that makes `commit_all` crash-atomic |
//! | [`boundary`] | resources, the registry, and which sandbox a resource belongs to |
//! | [`checkpoint`] | checkpoints (deduplicated, proportional to change) and rollback to them |
//! | [`custom`] | custom strategies: the protocol, the registry, shared-library modules |
//! | [`phases`] | the Execute and Apply phase hooks (checkpoint, run, roll back on failure) |
//! | `fault` | test faults of commits (only with the feature `fault-injection`) |
//!
//! The plan layer sits above [`crate::apply`] (commits go through the atomic 3-way apply and
//! its undo records) and [`crate::tree`] (snapshots and diffs); nothing below imports it.

pub mod backend;
#[doc(hidden)]
pub mod batch;
pub mod boundary;
pub mod checkpoint;
pub mod custom;
pub mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod group;
pub mod handle;
pub mod journal;
pub mod lock;
pub mod manager;
pub mod model;
pub mod own_snapshot;
pub mod phases;
pub mod record;
pub mod sandbox;
pub mod status;
pub mod strategy;

pub use crate::isolation::snapshot::SnapshotInfo;
pub use backend::{Backend, Checkpoints, NativeCheckpoints};
pub use boundary::{Resource, ResourceKind, ResourceRegistry};
pub use error::SandboxError;
pub use handle::SandboxHandle;
pub use manager::{Manager, PlanManager, Recovery, ResourceSandbox};
pub use model::{CommitResult, DiffEntry, DiffOp, SandboxContext, SandboxDiff, Strategy};
pub use sandbox::{CheckpointSupport, Sandbox};
pub use status::Status;
pub use strategy::sqlite::SqlAccess;

#[cfg(test)]
mod tests {
    /// The plan module's docs show the README's plan example; this keeps them the same text.
    #[test]
    fn module_docs_carry_the_readme_example() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("```rust,no_run\nuse patchbox::plan::{Manager, Strategy};")
            .expect("README has its plan example");
        let len = readme[start + 3..].find("```").expect("the block ends") + 6;
        let example = &readme[start..start + len];
        let docs: String = include_str!("mod.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
            .collect();
        assert!(
            docs.contains(example),
            "src/plan/mod.rs lacks the README example:\n{example}"
        );
    }
}
