//! OverlayFS as a mechanism: mounting a stack of layers ([`mount`]), reading the mount table
//! ([`mountinfo`]), reading what an upper layer changed ([`upper`]) and proving it did not
//! change ([`fingerprint`]), freezing or merging layers ([`layer`]), and replacing an idle
//! mount by another stack in place ([`swap`]).
//!
//! Both sandbox layers use it: the session's delegations in overlay isolation
//! ([`crate::session`]) and the plan layer's `overlay` strategy. Policy (which backend, where
//! the layers live, when to fall back to copies) is theirs; this module only does what it is
//! told, to the directories it is given.
//!
//! ```no_run
//! use patchbox::fs::overlay::{mount, upper};
//! # fn main() -> patchbox::Result<()> {
//! let layers = mount::Layers {
//!     lower: vec!["/s/lower".into()],
//!     upper: "/s/.upper-x".into(),
//!     work: "/s/.work-x".into(),
//!     rename_dirs: true,
//! };
//! let m = mount::mount(mount::Backend::Kernel, &layers, "/s/d-x".as_ref(), "/s/log".as_ref())?;
//! std::fs::write("/s/d-x/new.txt", "hi").unwrap();
//! let scan = upper::scan(&layers.upper, false)?;
//! assert!(scan.present.contains(&b"new.txt".to_vec()));
//! mount::unmount("/s/d-x".as_ref(), false, m.server)?;
//! # Ok(()) }
//! ```

pub mod fingerprint;
pub mod layer;
pub mod mount;
pub mod mountinfo;
pub mod swap;
pub mod upper;
pub mod walk;
