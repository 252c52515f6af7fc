//! Relative paths inside a tree (project, base or sandbox).
//!
//! A [`RelPath`] is a path made only of normal components: no root, no `.`, no `..`, not
//! empty. Joining one onto a directory can therefore never leave that directory lexically;
//! the chokepoint in [`crate::fs::session_dir`] adds the symlink checks. Paths are kept as raw bytes on
//! Unix, so non-UTF-8 names survive the round trip into patches.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// A validated relative path: only normal components, at least one.
///
/// ```
/// use patchbox::RelPath;
/// assert!(RelPath::new("src/main.rs").is_ok());
/// assert!(RelPath::new("../etc/passwd").is_err());
/// assert!(RelPath::new("/etc/passwd").is_err());
/// assert_eq!(RelPath::new("a/./b").unwrap().as_bytes(), b"a/b");
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct RelPath(PathBuf);

impl RelPath {
    /// Validates `p`: it must be relative, non-empty and free of `..`.
    /// `.` components are dropped.
    pub fn new(p: impl AsRef<Path>) -> Result<Self> {
        let p = p.as_ref();
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                Component::Normal(s) => out.push(s),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(Error::Containment {
                        path: p.to_path_buf(),
                        base: PathBuf::from("."),
                        reason: "path contains '..'",
                    })
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(Error::Containment {
                        path: p.to_path_buf(),
                        base: PathBuf::from("."),
                        reason: "path is absolute",
                    })
                }
            }
        }
        if out.as_os_str().is_empty() {
            return Err(Error::Containment {
                path: p.to_path_buf(),
                base: PathBuf::from("."),
                reason: "path is empty",
            });
        }
        Ok(RelPath(out))
    }

    /// Builds a `RelPath` from raw bytes with `/` separators (as stored in a git index or a
    /// patch header).
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        // Fast path for the common, already-normal form (one allocation): no empty, `.` or
        // `..` component and no leading or trailing `/`.
        let normal = !b.is_empty()
            && b.split(|&c| c == b'/')
                .all(|c| !c.is_empty() && c != b"." && c != b"..");
        if normal {
            return Ok(RelPath(PathBuf::from(OsStr::from_bytes(b))));
        }
        RelPath::new(Path::new(OsStr::from_bytes(b)))
    }

    /// The path as a `Path`.
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// The path as raw bytes, `/`-separated.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_os_str().as_bytes()
    }

    /// Appends one more relative path.
    pub fn join(&self, other: &RelPath) -> RelPath {
        RelPath(self.0.join(&other.0))
    }

    /// The parent directory, or `None` for a top-level name.
    pub fn parent(&self) -> Option<RelPath> {
        let p = self.0.parent()?;
        if p.as_os_str().is_empty() {
            None
        } else {
            Some(RelPath(p.to_path_buf()))
        }
    }
}

impl AsRef<Path> for RelPath {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl std::fmt::Display for RelPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_bytes_accepts_normal_and_normalizes_or_refuses_the_rest() {
        assert_eq!(RelPath::from_bytes(b"a/b").unwrap().as_bytes(), b"a/b");
        assert_eq!(RelPath::from_bytes(b"a//b/").unwrap().as_bytes(), b"a/b");
        assert_eq!(RelPath::from_bytes(b"./a").unwrap().as_bytes(), b"a");
        assert_eq!(
            RelPath::from_bytes(b"caf\xc3\xa9\xff").unwrap().as_bytes(),
            b"caf\xc3\xa9\xff"
        );
        for bad in [&b""[..], b".", b"..", b"/a", b"a/../b", b"a/.."] {
            assert!(RelPath::from_bytes(bad).is_err(), "{bad:?}");
        }
    }
}
