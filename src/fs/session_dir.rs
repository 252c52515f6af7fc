//! The session chokepoint: every write, rename and removal the library makes inside a
//! session directory goes through a helper here, and each takes a [`SessionPath`].
//!
//! The chokepoint is a capability, not a check. A [`SessionDir`] holds an open descriptor of
//! the session directory; a [`SessionPath`] is that descriptor plus a [`RelPath`] below it,
//! and is only built here ([`SessionDir::join`], [`path_in_session_base`]). Every helper
//! resolves the parent directory of its path at the moment of the call, beneath the session
//! directory's descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (or, on a
//! kernel without `openat2`, one `openat(O_NOFOLLOW | O_DIRECTORY)` per component), then acts
//! on the last component with a `*at` call relative to that descriptor that does not follow
//! a symlink there either (`openat` with `O_NOFOLLOW`/`O_EXCL`, `mkdirat`, `unlinkat`,
//! `renameat2`, `symlinkat`, `utimensat(AT_SYMLINK_NOFOLLOW)`). No path string is checked
//! and then used again: a `pending/` or `d-x/` swapped for a symlink after the path was
//! obtained makes the call fail with [`Error::Containment`] instead of writing elsewhere.
//! [`remove_tree`] removes fd-relative, never following a symlink swapped in mid-walk.
//! The system calls themselves are `fs::at`'s, the layer the project chokepoint shares;
//! this module is the policy: which paths, and what a refusal is.
//!
//! The copy engine ([`crate::tree::snapshot`]) works with a [`DirHandle`] of the directory
//! it fills, and makes its files relative to directory descriptors it opened beneath it.
//! The layout of what lives in a session directory is [`crate::session::layout`]'s.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::fs::at::{self, Errno};

use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;

/// An open session directory: the capability every [`SessionPath`] is relative to.
///
/// It holds a descriptor of the directory, opened without following a symlink, and its
/// path (for messages, and to hand to callers that need one). Cloning is cheap (shared).
#[derive(Clone)]
pub struct SessionDir(Arc<DirInner>);

struct DirInner {
    fd: OwnedFd,
    path: PathBuf,
}

impl std::fmt::Debug for SessionDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SessionDir").field(&self.0.path).finish()
    }
}

/// A path proven to lie inside a session directory: the session directory's descriptor and
/// a relative path below it (none: the session directory itself).
///
/// Only [`SessionDir::join`] (and [`path_in_session_base`]) and `SessionPath::child`
/// (crate-private) build one; the write helpers of this module accept nothing else, and each
/// resolves it beneath the descriptor, never following a symlink, when it is called.
#[derive(Clone)]
pub struct SessionPath {
    dir: SessionDir,
    rel: Option<RelPath>,
    full: PathBuf,
}

impl std::fmt::Debug for SessionPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SessionPath").field(&self.full).finish()
    }
}

impl PartialEq for SessionPath {
    fn eq(&self, other: &Self) -> bool {
        self.full == other.full
    }
}

impl Eq for SessionPath {}

impl SessionPath {
    /// The full path (for messages and for callers that hand it on; the helpers of this
    /// module never open it in one piece).
    pub fn as_path(&self) -> &Path {
        &self.full
    }

    /// The path relative to the session directory; `None` for the session directory itself.
    pub fn rel(&self) -> Option<&RelPath> {
        self.rel.as_ref()
    }

    /// The session directory it is relative to.
    pub fn session(&self) -> &SessionDir {
        &self.dir
    }

    /// A path below this one. The join is lexically contained (a [`RelPath`] has no `..`),
    /// and like every [`SessionPath`] it is resolved beneath the session directory, without
    /// following symlinks, by each helper it is given to.
    pub(crate) fn child(&self, rel: &RelPath) -> SessionPath {
        let rel = match &self.rel {
            Some(r) => r.join(rel),
            None => rel.clone(),
        };
        SessionPath {
            full: self.dir.0.path.join(rel.as_path()),
            dir: self.dir.clone(),
            rel: Some(rel),
        }
    }
}

impl AsRef<Path> for SessionPath {
    fn as_ref(&self) -> &Path {
        &self.full
    }
}

fn lexical_normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::RootDir => out.push("/"),
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn io_err(op: &'static str, path: &Path, e: Errno) -> Error {
    Error::io(op, path, std::io::Error::from(e))
}

/// A directory descriptor for a `*at` call: the session directory's own, or one opened
/// beneath it.
enum At<'a> {
    Borrowed(BorrowedFd<'a>),
    Owned(OwnedFd),
}

impl AsFd for At<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            At::Borrowed(b) => *b,
            At::Owned(o) => o.as_fd(),
        }
    }
}

impl SessionDir {
    /// Opens the session directory `path` (which must be a real directory, not a symlink).
    ///
    /// ```
    /// use patchbox::fs::session_dir::SessionDir;
    /// let dir = tempfile::tempdir().unwrap();
    /// let s = SessionDir::open(dir.path()).unwrap();
    /// assert_eq!(s.path(), dir.path());
    /// ```
    pub fn open(path: &Path) -> Result<SessionDir> {
        match at::open_path_dir_nofollow(path) {
            Ok(fd) => Ok(SessionDir(Arc::new(DirInner {
                fd,
                path: path.to_path_buf(),
            }))),
            Err(Errno::LOOP | Errno::NOTDIR) => Err(Error::Containment {
                path: path.to_path_buf(),
                base: path.to_path_buf(),
                reason: "session directory is not a real directory",
            }),
            Err(e) => Err(io_err("open session directory", path, e)),
        }
    }

    /// The same open directory under a new path (it was renamed there).
    pub(crate) fn renamed(&self, path: &Path) -> Result<SessionDir> {
        let fd = self.0.fd.try_clone().ctx("duplicate descriptor", path)?;
        Ok(SessionDir(Arc::new(DirInner {
            fd,
            path: path.to_path_buf(),
        })))
    }

    /// The session directory's path.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The names in the session directory, read through its descriptor (so they are the
    /// names of the directory this capability holds, wherever its path now leads).
    pub fn names(&self) -> Result<Vec<OsString>> {
        // Opened afresh: a listing of its own, from the first name.
        let names = at::open_dir(self.0.fd.as_fd(), c".")
            .and_then(at::names)
            .map_err(|e| io_err("list session", &self.0.path, e))?;
        Ok(names
            .into_iter()
            .map(|n| OsStr::from_bytes(n.to_bytes()).to_os_string())
            .collect())
    }

    fn refuse(&self, candidate: &Path, reason: &'static str) -> Error {
        Error::Containment {
            path: candidate.to_path_buf(),
            base: self.0.path.clone(),
            reason,
        }
    }

    /// The chokepoint: proves that `candidate` lies inside this session directory and
    /// returns it as a [`SessionPath`].
    ///
    /// `candidate` may be absolute or relative to the session directory. Refused: any `..`
    /// component; a path outside the session directory (compared by components, so
    /// `/x/sandbox-backup` is not inside `/x/sandbox`); a path through or at a symlink
    /// (a `pending/` or `d-x/` replaced by a link pointing elsewhere). This early check
    /// gives a clear error; the helpers check again, by construction, when they are called.
    ///
    /// ```
    /// use patchbox::fs::session_dir::SessionDir;
    /// let dir = tempfile::tempdir().unwrap();
    /// let s = SessionDir::open(&dir.path().canonicalize().unwrap()).unwrap();
    /// assert!(s.join(&s.path().join("d-1")).is_ok());
    /// assert!(s.join(std::path::Path::new("pending/x.patch")).is_ok());
    /// assert!(s.join(&s.path().join("../elsewhere")).is_err());
    /// ```
    pub fn join(&self, candidate: &Path) -> Result<SessionPath> {
        let base = &self.0.path;
        let joined = if candidate.is_absolute() {
            candidate.to_path_buf()
        } else {
            base.join(candidate)
        };
        let Some(norm) = lexical_normalize(&joined) else {
            return Err(self.refuse(candidate, "path contains '..'"));
        };
        let Ok(rest) = norm.strip_prefix(base) else {
            return Err(self.refuse(candidate, "path is not below the session directory"));
        };
        if rest.as_os_str().is_empty() {
            return Ok(SessionPath {
                dir: self.clone(),
                rel: None,
                full: norm,
            });
        }
        let rel = RelPath::new(rest)?;
        let p = SessionPath {
            dir: self.clone(),
            rel: Some(rel),
            full: norm,
        };
        // Early, for a clear refusal: nothing on the way, the last component included, may
        // be a symlink. A missing component ends the check (it will be created).
        match p.parent_at("check path") {
            Ok(Some((dir, name))) => {
                if at::is_symlink(dir.as_fd(), &name) {
                    return Err(self.refuse(candidate, "path goes through a symlink"));
                }
            }
            Ok(None) => {}
            Err(e) => return Err(e),
        }
        Ok(p)
    }
}

/// The chokepoint for a session directory given by path: opens it ([`SessionDir::open`])
/// and checks `candidate` with [`SessionDir::join`]. Code that works on one session many
/// times holds a [`SessionDir`] instead.
///
/// ```
/// use patchbox::fs::session_dir::path_in_session_base;
/// let dir = tempfile::tempdir().unwrap();
/// let s = dir.path().canonicalize().unwrap();
/// assert!(path_in_session_base(&s, &s.join("d-1")).is_ok());
/// assert!(path_in_session_base(&s, &s.join("../elsewhere")).is_err());
/// let sibling = format!("{}-backup/x", s.display());
/// assert!(path_in_session_base(&s, std::path::Path::new(&sibling)).is_err());
/// ```
pub fn path_in_session_base(session_dir: &Path, candidate: &Path) -> Result<SessionPath> {
    SessionDir::open(session_dir)?.join(candidate)
}

impl SessionPath {
    fn refuse(&self, reason: &'static str) -> Error {
        Error::Containment {
            path: self.full.clone(),
            base: self.dir.0.path.clone(),
            reason,
        }
    }

    /// Maps a resolution error: a symlink on the way is a containment refusal.
    fn resolve_err(&self, op: &'static str, e: Errno) -> Error {
        match e {
            Errno::LOOP => self.refuse("path goes through a symlink"),
            Errno::XDEV => self.refuse("path leaves the session directory"),
            e => io_err(op, &self.full, e),
        }
    }

    /// The parent directory (opened beneath the session directory now, no symlink followed)
    /// and the last component. `Ok(None)`: a parent directory does not exist. For the
    /// session directory itself, the directory holding it (see [`SessionPath::self_at`]).
    fn parent_at(&self, op: &'static str) -> Result<Option<(At<'_>, OsString)>> {
        let Some(rel) = &self.rel else {
            return self.self_at(op).map(Some);
        };
        let (parent, name) = split(rel);
        let name = name.to_os_string();
        let Some(parent) = parent else {
            return Ok(Some((At::Borrowed(self.dir.0.fd.as_fd()), name)));
        };
        match at::open_beneath(self.dir.0.fd.as_fd(), parent) {
            Ok(fd) => Ok(Some((At::Owned(fd), name))),
            Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
            Err(e) => Err(self.resolve_err(op, e)),
        }
    }

    /// [`SessionPath::parent_at`] for a call that needs the parent to exist. Only removals
    /// act on the session directory itself: anything else given it is refused, so no write
    /// ever lands beside the session directory.
    fn need_parent(&self, op: &'static str) -> Result<(At<'_>, OsString)> {
        if self.rel.is_none() {
            return Err(self.refuse("only removal may act on the session directory itself"));
        }
        self.parent_at(op)?.ok_or_else(|| {
            Error::io(
                op,
                &self.full,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "parent directory does not exist",
                ),
            )
        })
    }

    /// The directory holding the session directory, and its name there, after checking that
    /// the name still is the directory whose descriptor this session holds (the session
    /// directory itself is removed through it).
    fn self_at(&self, op: &'static str) -> Result<(At<'_>, OsString)> {
        let path = &self.dir.0.path;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(self.refuse("the session directory has no parent"));
        };
        let pfd = at::open_path_dir_nofollow(parent).map_err(|e| io_err(op, parent, e))?;
        let here = at::lstat(pfd.as_fd(), name).map_err(|e| io_err(op, path, e))?;
        let ours = at::fstat(self.dir.0.fd.as_fd()).map_err(|e| io_err(op, path, e))?;
        if (here.st_dev, here.st_ino) != (ours.st_dev, ours.st_ino) {
            return Err(self.refuse("the session directory was replaced"));
        }
        Ok((At::Owned(pfd), name.to_os_string()))
    }

    /// Opens this path as a directory (the session directory itself included).
    fn open_dir(&self, op: &'static str) -> std::result::Result<OwnedFd, Error> {
        let r = match &self.rel {
            None => self
                .dir
                .0
                .fd
                .try_clone()
                .map_err(|e| Error::io(op, &self.full, e))?,
            Some(rel) => at::open_beneath(self.dir.0.fd.as_fd(), rel.as_path())
                .map_err(|e| self.resolve_err(op, e))?,
        };
        Ok(r)
    }
}

fn split(rel: &RelPath) -> (Option<&Path>, &OsStr) {
    let p = rel.as_path();
    let name = p.file_name().unwrap_or(p.as_os_str());
    let parent = p.parent().filter(|p| !p.as_os_str().is_empty());
    (parent, name)
}

fn tmp_name(prefix: &str, name: &OsStr, suffix: &str) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(name);
    s.push(format!(".{}{suffix}", ulid::Ulid::new()));
    s
}

mod handle;
mod ops;
mod pinned;

pub use handle::{open_dir, DirHandle};
pub use ops::*;
pub use pinned::{create_dir_pinned, remove_pinned_dir, PinnedDir};
