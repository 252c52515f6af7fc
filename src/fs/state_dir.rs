//! The state chokepoint: every write, rename and removal the library makes inside its own
//! state directories (a session's directory, a plan sandbox's, the stores of shared layers,
//! snapshots and checkpoints) goes through a helper here, and each takes a [`StatePath`].
//!
//! The chokepoint is a capability, not a check. A [`StateDir`] holds an open descriptor of
//! the state directory; a [`StatePath`] is that descriptor plus a [`RelPath`] below it,
//! and is only built here ([`StateDir::join`], [`path_in_state_dir`]). Every helper
//! resolves the parent directory of its path at the moment of the call, beneath the state
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
//! The layout of what lives in a state directory is [`crate::session::layout`]'s.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::fs::at::{self, Errno};

use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;

/// An open state directory: the capability every [`StatePath`] is relative to.
///
/// It holds a descriptor of the directory, opened without following a symlink, and its
/// path (for messages, and to hand to callers that need one). Cloning is cheap (shared).
#[derive(Clone)]
pub struct StateDir(Arc<DirInner>);

struct DirInner {
    fd: OwnedFd,
    path: PathBuf,
}

impl std::fmt::Debug for StateDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StateDir").field(&self.0.path).finish()
    }
}

/// A path proven to lie inside a state directory: the state directory's descriptor and
/// a relative path below it (none: the state directory itself).
///
/// Only [`StateDir::join`] (and [`path_in_state_dir`]) and `StatePath::child`
/// (crate-private) build one; the write helpers of this module accept nothing else, and each
/// resolves it beneath the descriptor, never following a symlink, when it is called.
#[derive(Clone)]
pub struct StatePath {
    dir: StateDir,
    rel: Option<RelPath>,
    full: PathBuf,
}

impl std::fmt::Debug for StatePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StatePath").field(&self.full).finish()
    }
}

impl PartialEq for StatePath {
    fn eq(&self, other: &Self) -> bool {
        self.full == other.full
    }
}

impl Eq for StatePath {}

impl StatePath {
    /// The full path (for messages and for callers that hand it on; the helpers of this
    /// module never open it in one piece).
    pub fn as_path(&self) -> &Path {
        &self.full
    }

    /// The path relative to the state directory; `None` for the state directory itself.
    pub fn rel(&self) -> Option<&RelPath> {
        self.rel.as_ref()
    }

    /// The state directory it is relative to.
    pub fn session(&self) -> &StateDir {
        &self.dir
    }

    /// A path below this one. The join is lexically contained (a [`RelPath`] has no `..`),
    /// and like every [`StatePath`] it is resolved beneath the state directory, without
    /// following symlinks, by each helper it is given to.
    pub(crate) fn child(&self, rel: &RelPath) -> StatePath {
        let rel = match &self.rel {
            Some(r) => r.join(rel),
            None => rel.clone(),
        };
        StatePath {
            full: self.dir.0.path.join(rel.as_path()),
            dir: self.dir.clone(),
            rel: Some(rel),
        }
    }
}

impl AsRef<Path> for StatePath {
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

/// A directory descriptor for a `*at` call: the state directory's own, or one opened
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

impl StateDir {
    /// Opens the state directory `path` (which must be a real directory, not a symlink).
    ///
    /// ```
    /// use patchbox::fs::state_dir::StateDir;
    /// let dir = tempfile::tempdir().unwrap();
    /// let s = StateDir::open(dir.path()).unwrap();
    /// assert_eq!(s.path(), dir.path());
    /// ```
    pub fn open(path: &Path) -> Result<StateDir> {
        match at::open_path_dir_nofollow(path) {
            Ok(fd) => Ok(StateDir(Arc::new(DirInner {
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
    pub(crate) fn renamed(&self, path: &Path) -> Result<StateDir> {
        let fd = self.0.fd.try_clone().ctx("duplicate descriptor", path)?;
        Ok(StateDir(Arc::new(DirInner {
            fd,
            path: path.to_path_buf(),
        })))
    }

    /// The state directory's path.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The names in the state directory, read through its descriptor (so they are the
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

    /// The chokepoint: proves that `candidate` lies inside this state directory and
    /// returns it as a [`StatePath`].
    ///
    /// `candidate` may be absolute or relative to the state directory. Refused: any `..`
    /// component; a path outside the state directory (compared by components, so
    /// `/x/sandbox-backup` is not inside `/x/sandbox`); a path through or at a symlink
    /// (a `pending/` or `d-x/` replaced by a link pointing elsewhere). This early check
    /// gives a clear error; the helpers check again, by construction, when they are called.
    ///
    /// ```
    /// use patchbox::fs::state_dir::StateDir;
    /// let dir = tempfile::tempdir().unwrap();
    /// let s = StateDir::open(&dir.path().canonicalize().unwrap()).unwrap();
    /// assert!(s.join(&s.path().join("d-1")).is_ok());
    /// assert!(s.join(std::path::Path::new("pending/x.patch")).is_ok());
    /// assert!(s.join(&s.path().join("../elsewhere")).is_err());
    /// ```
    pub fn join(&self, candidate: &Path) -> Result<StatePath> {
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
            return Ok(StatePath {
                dir: self.clone(),
                rel: None,
                full: norm,
            });
        }
        let rel = RelPath::new(rest)?;
        let p = StatePath {
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

/// The chokepoint for a state directory given by path: opens it ([`StateDir::open`])
/// and checks `candidate` with [`StateDir::join`]. Code that works on one session many
/// times holds a [`StateDir`] instead.
///
/// ```
/// use patchbox::fs::state_dir::path_in_state_dir;
/// let dir = tempfile::tempdir().unwrap();
/// let s = dir.path().canonicalize().unwrap();
/// assert!(path_in_state_dir(&s, &s.join("d-1")).is_ok());
/// assert!(path_in_state_dir(&s, &s.join("../elsewhere")).is_err());
/// let sibling = format!("{}-backup/x", s.display());
/// assert!(path_in_state_dir(&s, std::path::Path::new(&sibling)).is_err());
/// ```
pub fn path_in_state_dir(session_dir: &Path, candidate: &Path) -> Result<StatePath> {
    StateDir::open(session_dir)?.join(candidate)
}

impl StatePath {
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

    /// The parent directory (opened beneath the state directory now, no symlink followed)
    /// and the last component. `Ok(None)`: a parent directory does not exist. For the
    /// state directory itself, the directory holding it (see [`StatePath::self_at`]).
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

    /// [`StatePath::parent_at`] for a call that needs the parent to exist. Only removals
    /// act on the state directory itself: anything else given it is refused, so no write
    /// ever lands beside the state directory.
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

    /// The directory holding the state directory, and its name there, after checking that
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

    /// Opens this path as a directory (the state directory itself included).
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
