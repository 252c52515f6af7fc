//! The object-store layer's error type.
//!
//! Every variant names the store (its URL) and the operation; a failure that comes from a
//! file also names the path, and one that comes from the object-store client names the key.
//! [`StoreError::is_unreachable`] tells a caller when the store itself failed (down,
//! refused, timed out, half a write done) so it can keep the work elsewhere and retry later.

use std::path::PathBuf;

/// What can go wrong reaching or using an object store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store URL is not one this library understands.
    #[error("store URL {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key that cannot name an object (empty segment, `..`, a control character …).
    #[error("invalid store key {key:?}: {reason}")]
    Key {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A directory store's file operation failed.
    #[error("{op} {} (store {store}): {source}", path.display())]
    Io {
        /// The store's URL.
        store: String,
        /// What the library was doing.
        op: &'static str,
        /// The file it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The object-store client failed (the server is down, refused the request, timed out,
    /// the credentials were refused …).
    #[error("{op} {key} (store {store}): {source}")]
    Remote {
        /// The store's URL.
        store: String,
        /// What the library was doing.
        op: &'static str,
        /// The key it was done to.
        key: String,
        /// The client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// What the store holds is not what was written there (a record that does not parse, an
    /// object whose content does not match its id).
    #[error("{key} (store {store}): {reason}")]
    Corrupt {
        /// The store's URL.
        store: String,
        /// The object.
        key: String,
        /// What is wrong.
        reason: String,
    },
}

impl StoreError {
    /// True when the store itself failed (not the caller's input, not corrupt data): the
    /// work should be kept locally and sent again later.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, StoreError::Remote { .. } | StoreError::Io { .. })
    }
}

/// The store layer's result.
pub type StoreResult<T> = std::result::Result<T, StoreError>;
