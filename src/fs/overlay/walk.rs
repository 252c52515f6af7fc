//! One walk of a layer directory through descriptors, shared by everything that reads an
//! upper layer whole: [`super::upper::scan`], [`super::fingerprint`] and
//! [`super::swap::has_hard_links`].
//!
//! ```no_run
//! # fn main() -> patchbox::Result<()> {
//! use patchbox::fs::overlay::walk::{walk, Next};
//! let mut files = 0;
//! walk(std::path::Path::new("/tmp/upper"), &mut |e| {
//!     if e.is_dir() { return Ok(Next::Descend) }
//!     files += 1;
//!     Ok(Next::Skip)
//! })?;
//! # Ok(()) }
//! ```
//!
//! Each entry is stat'ed relative to its directory's descriptor (`fstatat`), and each
//! directory is opened relative to its parent's, so the kernel resolves one name per call
//! instead of the whole path from `/` (the path walks were a sixth of a `commit_all`'s
//! check on a Linux-sized tree). A directory's own descriptor is handed to the visitor, so
//! its extended attributes (opaque markers) are read without a path either. The walk is
//! depth first and holds one descriptor per level, never one per pending directory.
//! Nothing is followed: a symlink is reported as itself, and a directory is opened with
//! `O_NOFOLLOW`.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{Dir, FileType, Stat};

use crate::error::{Error, Result};
use crate::fs::at;

/// One entry of the layer, as the walk found it.
pub struct Entry<'a> {
    /// Its path relative to the layer's root.
    pub rel: &'a [u8],
    /// Its name.
    pub name: &'a [u8],
    /// Its own stat data (not followed).
    pub stat: &'a Stat,
    /// Whether it is directly in the layer's root.
    pub top: bool,
    /// For a directory, its own descriptor (read-only); `None` for anything else, and for a
    /// directory that could not be opened.
    pub dir: Option<BorrowedFd<'a>>,
}

impl Entry<'_> {
    /// Whether the entry is a directory.
    pub fn is_dir(&self) -> bool {
        FileType::from_raw_mode(self.stat.st_mode) == FileType::Directory
    }
}

/// What the walk does after a visit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Goes into the entry (a directory); for anything else the same as `Skip`.
    Descend,
    /// Goes on with the next entry.
    Skip,
    /// Ends the walk.
    Stop,
}

/// Calls `visit` for every entry below `root` (`root` itself excluded), directories before
/// what they hold. Returns whether a visit stopped the walk. Errors name the path and the
/// operation.
pub fn walk(root: &Path, visit: &mut dyn FnMut(&Entry<'_>) -> Result<Next>) -> Result<bool> {
    let fd = at::open_path_dir(root).map_err(|e| Error::io("open directory", root, e.into()))?;
    let mut rel = Vec::new();
    dir(root, fd, &mut rel, visit)
}

/// Walks the directory open as `fd`, whose path below the root is `rel` (restored on return).
fn dir(
    root: &Path,
    fd: OwnedFd,
    rel: &mut Vec<u8>,
    visit: &mut dyn FnMut(&Entry<'_>) -> Result<Next>,
) -> Result<bool> {
    let at = |rel: &[u8]| root.join(OsStr::from_bytes(rel));
    let mut d = Dir::new(fd).map_err(|e| Error::io("read directory", at(rel), e.into()))?;
    let top = rel.is_empty();
    let base = rel.len();
    while let Some(entry) = d.read() {
        let entry = entry.map_err(|e| Error::io("read directory", at(&rel[..base]), e.into()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        rel.truncate(base);
        if !top {
            rel.push(b'/');
        }
        rel.extend_from_slice(name);
        let dfd = d
            .fd()
            .map_err(|e| Error::io("read directory", at(&rel[..base]), e.into()))?;
        let stat = at::lstat(dfd, name).map_err(|e| Error::io("stat", at(rel), e.into()))?;
        let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
        // Opened before the visit, which may read its attributes; a directory that cannot be
        // opened (no permission) is an error only if the visitor wants to go into it.
        let child = is_dir.then(|| at::open_dir(dfd, name));
        let next = visit(&Entry {
            rel,
            name,
            stat: &stat,
            top,
            dir: match &child {
                Some(Ok(c)) => Some(c.as_fd()),
                _ => None,
            },
        })?;
        match next {
            Next::Stop => return Ok(true),
            Next::Descend => {
                let stopped = match child {
                    Some(Ok(c)) => dir(root, c, rel, visit)?,
                    Some(Err(e)) => return Err(Error::io("open directory", at(rel), e.into())),
                    None => false,
                };
                if stopped {
                    return Ok(true);
                }
            }
            Next::Skip => {}
        }
    }
    rel.truncate(base);
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_every_entry_once_with_relative_paths_and_honours_skip_and_stop() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::create_dir_all(p.join("skip/inner")).unwrap();
        std::fs::write(p.join("a/b/f"), "x").unwrap();
        std::fs::write(p.join("top"), "y").unwrap();
        std::os::unix::fs::symlink("a", p.join("link")).unwrap();
        let mut seen = Vec::new();
        let stopped = walk(p, &mut |e| {
            seen.push((
                String::from_utf8(e.rel.to_vec()).unwrap(),
                e.top,
                e.is_dir(),
            ));
            assert_eq!(e.dir.is_some(), e.is_dir());
            Ok(if e.name == b"skip" {
                Next::Skip
            } else {
                Next::Descend
            })
        })
        .unwrap();
        assert!(!stopped);
        seen.sort();
        let want = [
            ("a", true, true),
            ("a/b", false, true),
            ("a/b/f", false, false),
            ("link", true, false),
            ("skip", true, true),
            ("top", true, false),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(r, t, d)| (r.to_string(), *t, *d))
            .collect();
        assert_eq!(seen, want);

        let mut n = 0;
        let stopped = walk(p, &mut |_| {
            n += 1;
            Ok(Next::Stop)
        })
        .unwrap();
        assert!(stopped);
        assert_eq!(n, 1);
    }

    #[test]
    fn a_missing_root_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let gone = d.path().join("gone");
        let e = walk(&gone, &mut |_| Ok(Next::Descend)).unwrap_err();
        assert!(e.to_string().contains("gone"), "{e}");
    }
}
