//! # patchbox
//!
//! Session sandboxes for agent engines. An engine session snapshots the user's project into
//! `<root>/<session>/base/`; each delegated sub-agent works in its own copy `d-<id>/`; its work
//! comes back as a git-style patch that `git apply` accepts, or waits in
//! `pending/<id>.patch`. The user's project is never written except by an explicit apply.
//!
//! The README's example (a test keeps the two identical):
//!
//! ```rust,no_run
//! use patchbox::session::{Manager, Options};
//! use patchbox::{Decision, Routed};
//!
//! fn main() -> patchbox::Result<()> {
//!     let mgr = Manager::with_options("/path/to/project", Options::default())?;
//!     let sb = mgr.create_sandbox("fix-tests", None)?;          // copy of the snapshot
//!     let status = mgr.command(&sb, "make").arg("test").status(); // cwd = sandbox; never chdir
//!     let follow_up = mgr.create_sandbox("docs", Some(&sb))?;   // chained: starts from sb's state
//!     let res = mgr.finalize_sandbox(&follow_up)?;               // patch vs the session snapshot
//!     println!("{} files touched", res.files_touched.len());
//!     let done = mgr.complete_sandbox(&sb, Some(&|r| {
//!         if r.files_touched.len() < 10 { Ok(Decision::Accept) } else { Ok(Decision::Reject) }
//!     }))?;
//!     if let Routed::Pending(path) = done.routed { eprintln!("kept for review: {}", path.display()); }
//!     let _ = status;
//!     Ok(())
//! }   // drop: base/ and d-*/ removed; pending patches kept
//! ```
//!
//! ## Map
//!
//! One substrate under two faces: the [`session`] and [`plan`] families are siblings that
//! never import each other, over the same isolation substrate, apply engine and filesystem
//! layer. Dependencies run downwards only (a lower layer never imports a higher one); the
//! whole picture is in `docs/architecture.md`, "The map".
//!
//! | layer | owns |
//! |---|---|
//! | `cli` (the binary, feature `cli`), `ffi` (feature `ffi`) | the command line; the C++ bridges |
//! | [`records`] | the JSON records of `--json` and the C++ and Python faces |
//! | [`session`], [`plan`] | the two families: engine sessions ([`ScopedSandbox`], pending store, recovery); plan sandboxes (strategies by name, checkpoints, atomic `commit_all`) |
//! | [`isolation`] | the substrate both stand on: root, overlay backend choice, shared lower layers, the snapshot store, one prune, tree base |
//! | [`apply`] | applying a patch to the project: resolver, transaction, undo |
//! | [`tree`] | a project's file set: selection, walk, snapshot copy, base, tree diff |
//! | [`patch`] | the patch model, parser, writer, hunk placement, 3-way merge |
//! | [`git`] | read-only git: repository, config, index, ignore rules, objects, ids, encodings |
//! | [`fs`] | the `*at` calls written once, [`RelPath`], the state and project chokepoints |
//! | [`store`], [`id`], [`provenance`] | object stores; ids that sort by creation; what produced a piece of work |
//!
//! [`error`] is shared by all of them, and [`cores`] (work split over the cores, with a
//! fallback to the calling thread) serves any of them, importing nothing.

#![warn(missing_docs)]

pub mod apply;
pub mod cores;
pub mod error;
#[cfg(feature = "ffi")]
pub mod ffi;
pub mod fs;
pub mod git;
pub mod id;
pub mod isolation;
pub mod patch;
pub mod plan;
pub mod provenance;
pub mod records;
pub mod session;
pub mod store;
pub mod tree;

pub use error::{Error, Result};
pub use fs::RelPath;
pub use session::delegation::{
    Completion, DecideFn, Decision, Isolation, IsolationMode, Routed, SandboxInfo, SandboxResult,
};
pub use session::manager::{Delivery, Options, SandboxManager};
pub use session::scoped::ScopedSandbox;

#[cfg(test)]
mod tests {
    /// The crate docs show the README's Rust example; this keeps them the same text.
    #[test]
    fn crate_docs_carry_the_readme_example() {
        let readme = include_str!("../README.md");
        let start = readme
            .find("```rust,no_run\nuse patchbox::session::{Manager")
            .expect("README has its Rust example");
        let len = readme[start + 3..].find("```").expect("the block ends") + 6;
        let example = &readme[start..start + len];
        let lib: String = include_str!("lib.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
            .collect();
        assert!(
            lib.contains(example),
            "src/lib.rs lacks the README example:\n{example}"
        );
    }
}
