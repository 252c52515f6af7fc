//! Object stores: where pending patches and checkpoints can live beyond one machine.
//!
//! One interface ([`Objects`]: create-only writes, reads, listing, deletes of immutable
//! objects) with two backends, chosen by a [`StoreUrl`]: [`DirObjects`], files under a
//! directory (a shared mount, a test), and [`S3Objects`], a bucket of any S3-compatible store
//! reached through the `object_store` crate with the standard AWS variables. Nothing here
//! touches a network unless an `s3://` URL is opened.
//!
//! ```
//! use patchbox::store::{self, Key, Put};
//! let dir = tempfile::tempdir().unwrap();
//! let objects = store::open(&dir.path().display().to_string()).unwrap();
//! let key = Key::new("a/b.txt").unwrap();
//! assert_eq!(objects.put_new(&key, b"one").unwrap(), Put::Created);
//! assert_eq!(objects.put_new(&key, b"two").unwrap(), Put::Exists); // never replaced
//! assert_eq!(objects.get(&key).unwrap().as_deref(), Some(&b"one"[..]));
//! ```

use std::sync::Arc;

pub mod backend;
pub mod error;
pub mod key;
pub mod local;
pub mod s3;
pub mod url;

pub use backend::{Listed, Objects, Put};
pub use error::{StoreError, StoreResult};
pub use key::Key;
pub use local::DirObjects;
pub use s3::S3Objects;
pub use url::StoreUrl;

/// Opens the store a URL names (`s3://bucket/prefix`, `file:///path` or a path).
pub fn open(url: &str) -> StoreResult<Arc<dyn Objects>> {
    open_url(&StoreUrl::parse(url)?)
}

/// Opens the store of a parsed URL.
pub fn open_url(url: &StoreUrl) -> StoreResult<Arc<dyn Objects>> {
    Ok(match url {
        StoreUrl::Dir(p) => Arc::new(DirObjects::new(p)),
        StoreUrl::S3 { bucket, prefix } => Arc::new(S3Objects::from_env(bucket, prefix)?),
    })
}
