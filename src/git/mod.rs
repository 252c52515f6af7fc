//! Git: everything the library knows about git repositories and git's formats, native (no
//! `git` process). The user's repository is only ever read; [`private`] writes the private
//! repository of a sandbox, in the library's own session directory.
//!
//! - [`repo`]: finding the repository of a project directory, and what its configuration
//!   (read by the crate-private `config` module) says about ignore files and case.
//! - [`index`]: the index file, with the stat data that lets unchanged tracked files be
//!   trusted without reading them.
//! - [`ignore`]: git's exclude rules (`.gitignore`, `info/exclude`, `core.excludesFile`).
//! - [`attributes`]: git's attributes (`.gitattributes`, `info/attributes`,
//!   `core.attributesFile`) and `core.autocrlf`, as far as they decide whether a work-tree
//!   file's bytes may differ from its blob.
//! - [`list_digest`]: a SHA-1 over a long list of small records, which lets a later session
//!   skip work when its list equals an earlier one.
//! - [`odb`]: the object store (loose objects, packs, alternates), read by object id.
//! - [`refs`]: `HEAD` and the branches and tags (loose and packed).
//! - [`private`]: a sandbox's own `.git` — the snapshot as `HEAD` and index, the user's
//!   objects reached through alternates.
//! - The formats shared with patches: object ids and hex ([`oid`]), deltas ([`delta`]),
//!   C-style path quoting ([`quote`]) and base85 ([`base85`]).
//!
//! ```
//! use std::process::Command;
//! use patchbox::git::{oid, repo};
//!
//! let dir = tempfile::tempdir()?;
//! let status = Command::new("git")
//!     .args(["init", "-q"])
//!     .current_dir(dir.path())
//!     .env("GIT_CONFIG_NOSYSTEM", "1")
//!     .env("HOME", dir.path())
//!     .status()?;
//! assert!(status.success());
//! std::fs::create_dir(dir.path().join("src"))?;
//!
//! let found = repo::discover_repo_with(&dir.path().join("src"), &repo::SelectOptions::default())?
//!     .expect("a repository");
//! assert_eq!(found.work_tree, std::fs::canonicalize(dir.path())?);
//! assert_eq!(found.prefix.unwrap().as_bytes(), b"src");
//!
//! // The id `git hash-object` gives an empty file.
//! assert_eq!(oid::blob_id_hex(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod attributes;
pub mod base85;
pub(crate) mod config;
pub mod delta;
pub mod ignore;
pub mod index;
pub mod list_digest;
pub mod odb;
pub mod oid;
pub mod private;
pub mod quote;
pub mod refs;
pub mod repo;
