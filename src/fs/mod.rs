//! Containment: the types that prove a path may be written.
//!
//! Two chokepoints stand side by side, named for what they guard. Inside the library's own
//! state directories (sessions, plan sandboxes, stores) a write takes a
//! [`state_dir::StatePath`]; inside the user's project (where only an apply ever
//! writes) it takes a [`project::ProjectPath`]. Both are built from a [`RelPath`], a relative
//! path with no `..` and no empty or `.` components, so an escape is refused before any
//! system call.
//!
//! ```
//! use patchbox::fs::RelPath;
//! assert!(RelPath::new("src/main.rs").is_ok());
//! assert!(RelPath::new("../etc/passwd").is_err());
//! assert!(RelPath::new("/etc/passwd").is_err());
//! ```

pub(crate) mod at;
pub mod btrfs;
pub(crate) mod dotgit;
pub mod overlay;
pub(crate) mod path_hash;
pub mod project;
pub mod relpath;
pub mod state_dir;
pub mod timestamp;
pub mod unix_millis;

pub use relpath::RelPath;
pub use timestamp::Timestamp;
