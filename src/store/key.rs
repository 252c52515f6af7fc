//! Keys: the names of objects in a store, validated once.
//!
//! A [`Key`] is a `/`-separated relative name whose segments are non-empty, not `.` or
//! `..`, and free of control characters and backslashes. Past this chokepoint a key can be
//! joined under a directory store's root without leaving it, and means the same object in
//! every backend.

use std::fmt;

use super::error::{StoreError, StoreResult};

/// A validated object name, relative to the store's root (its URL's prefix).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(String);

impl Key {
    /// Validates `name` as a key.
    pub fn new(name: impl Into<String>) -> StoreResult<Key> {
        let name = name.into();
        let bad = |reason| {
            Err(StoreError::Key {
                key: name.clone(),
                reason,
            })
        };
        if name.is_empty() {
            return bad("empty");
        }
        if name.len() > 900 {
            return bad("longer than 900 bytes");
        }
        if name.chars().any(|c| c.is_control() || c == '\\') {
            return bad("contains a control character or a backslash");
        }
        for seg in name.split('/') {
            if seg.is_empty() || seg == "." || seg == ".." {
                return bad("has an empty, '.' or '..' segment");
            }
        }
        Ok(Key(name))
    }

    /// `self/name`, validated.
    pub fn join(&self, name: &str) -> StoreResult<Key> {
        Key::new(format!("{}/{name}", self.0))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The last segment.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The rest of the key after `prefix/`, when it starts so.
    pub fn strip_prefix(&self, prefix: &Key) -> Option<&str> {
        self.0
            .strip_prefix(prefix.as_str())
            .and_then(|r| r.strip_prefix('/'))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_beneath_the_root() {
        assert!(Key::new("pending/records/s/d1.json").is_ok());
        for bad in [
            "", "/a", "a/", "a//b", "a/../b", "..", "./a", "a\\b", "a\nb",
        ] {
            assert!(Key::new(bad).is_err(), "{bad:?} accepted");
        }
        let k = Key::new("a/b").unwrap();
        assert_eq!(k.join("c").unwrap().as_str(), "a/b/c");
        assert!(k.join("..").is_err());
        assert_eq!(k.join("c").unwrap().strip_prefix(&k), Some("c"));
        assert_eq!(k.file_name(), "b");
    }
}
