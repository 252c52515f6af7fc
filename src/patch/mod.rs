//! Git-style patches: the model, the parser and the writer, and the line algorithms that
//! apply one (placing hunks, the 3-way merge).
//!
//! - [`model`]: what a patch is — a [`model::Patch`] of file patches (hunks, modes, renames,
//!   binary literals and deltas).
//! - [`parse`]: git-style and traditional unified patch text into that model.
//! - [`write`](mod@write): the patch of one file change, as `git diff --binary` writes it;
//!   [`large`]: the same for two large text files, read in chunks instead of held whole.
//! - [`stat`]: per-file summaries (change kind, lines in and out) and `--stat`'s drawing;
//!   [`select`]: part of a patch (some files, some hunks) and the rest as a patch of its own.
//! - Crate-private: `bytes` (the common head and tail of two byte strings), `line_diff` (the
//!   writer's line diff), `place` (finding where a hunk applies), `merge3` (the 3-way line
//!   merge).
//!
//! ```
//! use patchbox::patch::{parse::parse_patch, write::{write_file_diff, Side}};
//! use patchbox::RelPath;
//! let path = RelPath::new("hello.txt")?;
//! let old = Side { path: &path, mode: 0o100644, data: b"hello\n" };
//! let new = Side { path: &path, mode: 0o100644, data: b"hello\nworld\n" };
//! let mut text = Vec::new();
//! write_file_diff(&mut text, Some(old), Some(new));
//! let patch = parse_patch(&text)?;
//! assert_eq!(patch.files.len(), 1);
//! assert_eq!(patch.paths()[0].to_string(), "hello.txt");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod bytes;
pub mod large;
pub(crate) mod line_diff;
pub(crate) mod merge3;
pub mod model;
pub mod parse;
pub(crate) mod place;
pub mod select;
pub mod stat;
pub mod write;
