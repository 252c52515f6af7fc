//! The file set of a project: which files belong to it, the snapshot copy, the base, and the
//! diff of two trees.
//!
//! - [`select`] + [`walk`]: the files a snapshot holds (git's index and ignore rules, natively;
//!   the whole tree outside git).
//! - [`snapshot`]: copying them in parallel (`FICLONE` or `copy_file_range`), with stat keys.
//! - [`base`]: the session's base, as copies in `base/` or blobs of the user's object store.
//! - [`diff`]: what a sandbox changed, driven by the stat manifest taken when it was made.
//! - [`dir_diff`]: the patch between any two directories, compared by content.
//!
//! ```
//! use patchbox::tree::select::select_project;
//! let project = tempfile::tempdir()?;
//! std::fs::create_dir(project.path().join("src"))?;
//! std::fs::write(project.path().join("src/main.rs"), "fn main() {}\n")?;
//! let sel = select_project(project.path(), &[])?;
//! let paths: Vec<String> = sel.entries.iter().map(|e| e.rel.to_string()).collect();
//! assert_eq!(paths, ["src/main.rs"]);
//! assert!(sel.git.is_none(), "not a git project: the whole tree");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod base;
pub mod diff;
pub mod dir_diff;
pub mod listing;
pub mod overlay_diff;
pub mod select;
pub mod snapshot;
pub mod walk;
