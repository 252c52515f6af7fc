//! The interface every backend keeps: a flat namespace of immutable objects.
//!
//! Writes are create-only ([`Objects::put_new`]): an object, once there, is never replaced,
//! and a second writer of the same key learns it lost ([`Put::Exists`]) from the store itself,
//! in the same request (an S3 `PUT` with `If-None-Match: *`, a `link(2)` on a directory) — no
//! read-then-write race. An object is visible whole or not at all.

use std::time::SystemTime;

use super::error::StoreResult;
use super::key::Key;

/// What a create-only write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// The object was created with the given bytes.
    Created,
    /// An object of that key was already there; nothing was written.
    Exists,
}

/// One object found by [`Objects::list`].
#[derive(Clone, Debug)]
pub struct Listed {
    /// Its key.
    pub key: Key,
    /// Its size in bytes.
    pub size: u64,
    /// When it was written.
    pub modified: SystemTime,
}

/// A store of immutable objects (see the module docs). `Send + Sync`: one value serves
/// every thread of a process.
pub trait Objects: Send + Sync {
    /// Writes `data` under `key` unless an object is there already.
    fn put_new(&self, key: &Key, data: &[u8]) -> StoreResult<Put>;
    /// [`Objects::put_new`] of each item, in any order (a backend may send them at once);
    /// the results are in the items' order. The first failure is returned.
    fn put_new_all(&self, items: &[(Key, Vec<u8>)]) -> StoreResult<Vec<Put>> {
        items.iter().map(|(k, d)| self.put_new(k, d)).collect()
    }
    /// The object's bytes; `None` when there is none.
    fn get(&self, key: &Key) -> StoreResult<Option<Vec<u8>>>;
    /// Every object whose key starts with `prefix/`, in key order.
    fn list(&self, prefix: &Key) -> StoreResult<Vec<Listed>>;
    /// Removes the object; removing one that is not there is not an error.
    fn delete(&self, key: &Key) -> StoreResult<()>;
    /// The store's URL, for messages.
    fn url(&self) -> String;
}
