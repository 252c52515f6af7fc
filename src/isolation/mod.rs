//! The isolation substrate both faces stand on: sessions ([`crate::session`]) and plans
//! ([`crate::plan`]) each isolate a project's files the same way, so what they share lives
//! here once, below both.
//!
//! - [`root`]: the directory every sandbox lives under, and its default;
//! - [`backend`]: the choice kernel OverlayFS → `fuse-overlayfs` → copy, and the one reader
//!   of the environment variable that forces it;
//! - [`shared_lower`]: the store of lower layers shared by every overlay sandbox of a
//!   project (`<root>/lowers/`), session or plan;
//! - [`layer_digest`]: what a shared layer holds, in 28 bytes: a snapshot whose clean
//!   tracked files match it reads nothing more of the layer's manifest;
//! - [`layer_stats`]: the stat data of a shared layer's files, recorded once per layer;
//! - [`layered`]: a snapshot over that layer, holding only what differs from it;
//! - [`snapshot`]: the store of point-in-time snapshots plan sandboxes start from, each
//!   stacked on a shared layer where the project allows;
//! - [`holders`]: who uses a layer or a snapshot, recorded beside it;
//! - [`prune`]: the one prune of both stores, which both faces call;
//! - [`tree_base`]: a stable snapshot of a project's selected files, the pre-images and
//!   lower layer of a plan's `copy_on_write` and `overlay` sandboxes.
//!
//! It imports only the layers below it (fs, tree, git); neither face keeps a copy of any
//! of it.

pub mod backend;
pub mod holders;
pub mod layer_digest;
pub mod layer_stats;
pub mod layered;
pub mod prune;
pub mod root;
pub mod shared_lower;
pub mod snapshot;
pub mod tree_base;

pub use root::default_root;
