//! Plan sandboxes: every write of a plan's Execute phase goes to a sandbox per resource, so
//! the Apply phase can review a diff, roll back, or commit every sandbox of the plan all or
//! nothing.
//!
//! ```
//! use patchbox::plan::{PlanManager, Status, Strategy};
//! # fn main() -> Result<(), patchbox::plan::SandboxError> {
//! let root = tempfile::tempdir().unwrap();     // the library's root (never the project)
//! let project = tempfile::tempdir().unwrap();  // the user's files
//! std::fs::write(project.path().join("notes.txt"), "one\n").unwrap();
//!
//! let mgr = PlanManager::open(root.path())?;
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
//! | file | owns |
//! |---|---|
//! | [`status`] | the lifecycle and its transition table |
//! | [`error`] | [`SandboxError`], the users' exception hierarchy |
//! | [`model`] | strategies, contexts, commit results, diffs |
//! | [`sandbox`] | the [`Sandbox`] trait |
//! | [`record`] | a sandbox's state on disk, and the lifecycle guard |
//! | [`strategy`] | the built-in strategies |
//! | [`manager`] | [`PlanManager`]: lazy creation, `commit_all`, cleanup, recovery |
//! | [`lower`] | shared lower snapshots: `overlay` sandboxes made in O(1) |
//! | [`journal`] | the journal that makes `commit_all` crash-atomic |
//! | [`boundary`] | resources, the registry, and which sandbox a resource belongs to |
//!
//! The plan layer sits above [`crate::apply`] (commits go through the atomic 3-way apply and
//! its undo records) and [`crate::tree`] (snapshots and diffs); nothing below imports it.

pub mod boundary;
pub mod error;
pub mod journal;
pub mod lower;
pub mod manager;
pub mod model;
pub mod record;
pub mod sandbox;
pub mod status;
pub mod strategy;

pub use boundary::{Resource, ResourceKind, ResourceRegistry};
pub use error::SandboxError;
pub use lower::SnapshotInfo;
pub use manager::{PlanManager, Recovery, ResourceSandbox};
pub use model::{CommitResult, DiffEntry, DiffOp, SandboxContext, SandboxDiff, Strategy};
pub use sandbox::Sandbox;
pub use status::Status;
