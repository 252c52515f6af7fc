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
//!
//! The copy engine ([`crate::tree::snapshot`]) works with a [`DirHandle`] of the directory
//! it fills, and makes its files relative to directory descriptors it opened beneath it.
//! The layout of what lives in a session directory is [`crate::session::layout`]'s.

use std::ffi::{CStr, OsStr, OsString};
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

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

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Set once `openat2` turned out to be missing (kernel before 5.6, or a seccomp filter).
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens the directory `rel` beneath `base`, following no symlink on the way (`ELOOP` if
/// there is one) and never leaving `base`.
fn open_dir_beneath(base: BorrowedFd<'_>, rel: &Path) -> std::result::Result<OwnedFd, Errno> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(base, rel, DIR_FLAGS, Mode::empty(), how) {
                // A concurrent rename somewhere on the system: the kernel asks to retry.
                Err(Errno::AGAIN | Errno::INTR) if tries < 16 => tries += 1,
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                // With O_DIRECTORY a symlink (or a file) on the way gives ENOTDIR: the walk
                // tells which.
                Err(Errno::NOTDIR) => break,
                r => return r,
            }
        }
    }
    walk_dir_beneath(base, rel)
}

/// [`open_dir_beneath`] without `openat2`: one `openat(O_NOFOLLOW | O_DIRECTORY)` per
/// component.
fn walk_dir_beneath(base: BorrowedFd<'_>, rel: &Path) -> std::result::Result<OwnedFd, Errno> {
    let mut cur: Option<OwnedFd> = None;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            // A RelPath has only normal components; anything else is refused as an escape.
            return Err(Errno::XDEV);
        };
        let at = cur.as_ref().map_or(base, |f| f.as_fd());
        let next = match rustix::fs::openat(at, name, DIR_FLAGS, Mode::empty()) {
            Ok(f) => f,
            Err(Errno::NOTDIR) if is_symlink_at(at, name) => return Err(Errno::LOOP),
            Err(e) => return Err(e),
        };
        cur = Some(next);
    }
    match cur {
        Some(f) => Ok(f),
        None => rustix::fs::openat(base, c".", DIR_FLAGS, Mode::empty()),
    }
}

fn is_symlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink
    })
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
        match rustix::fs::open(path, DIR_FLAGS, Mode::empty()) {
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
        let mut dir = rustix::fs::Dir::read_from(&self.0.fd)
            .map_err(|e| io_err("list session", &self.0.path, e))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| io_err("list session", &self.0.path, e))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                out.push(OsStr::from_bytes(name).to_os_string());
            }
        }
        Ok(out)
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
                if is_symlink_at(dir.as_fd(), &name) {
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
        match open_dir_beneath(self.dir.0.fd.as_fd(), parent) {
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
        let pfd = rustix::fs::open(parent, DIR_FLAGS, Mode::empty())
            .map_err(|e| io_err(op, parent, e))?;
        let here = rustix::fs::statat(&pfd, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| io_err(op, path, e))?;
        let ours = rustix::fs::fstat(&self.dir.0.fd).map_err(|e| io_err(op, path, e))?;
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
            Some(rel) => open_dir_beneath(self.dir.0.fd.as_fd(), rel.as_path())
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

/// Creates a directory and its missing parents; none of them may be a symlink.
pub fn create_dir_all(p: &SessionPath) -> Result<()> {
    let Some(rel) = &p.rel else {
        return Ok(());
    };
    let base = p.dir.0.fd.as_fd();
    // Most often it exists already: one call.
    match open_dir_beneath(base, rel.as_path()) {
        Ok(_) => return Ok(()),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(p.resolve_err("create directory", e)),
    }
    let mut cur: Option<OwnedFd> = None;
    for c in rel.as_path().components() {
        let at = cur.as_ref().map_or(base, |f| f.as_fd());
        match rustix::fs::mkdirat(at, c.as_os_str(), Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io_err("create directory", &p.full, e)),
        }
        let next = match rustix::fs::openat(at, c.as_os_str(), DIR_FLAGS, Mode::empty()) {
            Ok(f) => f,
            Err(Errno::NOTDIR) if is_symlink_at(at, c.as_os_str()) => {
                return Err(p.refuse("path goes through a symlink"))
            }
            Err(e) => return Err(p.resolve_err("create directory", e)),
        };
        cur = Some(next);
    }
    Ok(())
}

/// Creates one directory; fails if it exists (so an id in use is never reused silently).
pub fn create_dir_new(p: &SessionPath) -> Result<()> {
    let (dir, name) = p.need_parent("create directory")?;
    rustix::fs::mkdirat(&dir, &name, Mode::from_raw_mode(0o777))
        .map_err(|e| io_err("create directory", &p.full, e))
}

/// Removes a directory tree; a missing path is not an error. Symlinks inside are removed,
/// never followed, also one swapped in for a directory while the tree is being removed: the
/// walk goes from directory descriptor to directory descriptor (`openat` with
/// `O_NOFOLLOW`), never by path.
pub fn remove_tree(p: &SessionPath) -> Result<()> {
    let Some((dir, name)) = p.parent_at("remove")? else {
        return Ok(());
    };
    if p.rel.is_none() {
        // The session directory itself: emptied through the descriptor this session holds
        // (checked to still be the one at its path by `self_at`).
        let fd = p.open_dir("remove")?;
        empty_dir(fd, &p.full)?;
        return match rustix::fs::unlinkat(&dir, &name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io_err("remove directory", &p.full, e)),
        };
    }
    remove_tree_at(dir.as_fd(), &name, &p.full)
}

/// Removes `name` in `dir`, recursively if it is a directory, following no symlink.
fn remove_tree_at(dir: BorrowedFd<'_>, name: &OsStr, display: &Path) -> Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => return Ok(()),
        // A directory (EISDIR on Linux, EPERM where POSIX allows it): emptied below.
        Err(Errno::ISDIR | Errno::PERM) => {}
        Err(e) => return Err(io_err("remove", display, e)),
    }
    match rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => empty_dir(fd, display)?,
        Err(Errno::NOENT) => return Ok(()),
        // Swapped for a symlink or a file since: removed itself, never followed.
        Err(Errno::LOOP | Errno::NOTDIR) => {
            return match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => Ok(()),
                Err(e) => Err(io_err("remove", display, e)),
            }
        }
        Err(e) => return Err(io_err("open directory", display, e)),
    }
    match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(io_err("remove directory", display, e)),
    }
}

/// Removes everything inside the open directory `top`, depth first with an explicit stack
/// (a deep tree costs heap, not call stack), never following a symlink.
fn empty_dir(top: OwnedFd, display: &Path) -> Result<()> {
    let open = |fd: OwnedFd, at: &Path| -> Result<rustix::fs::Dir> {
        rustix::fs::Dir::new(fd).map_err(|e| io_err("read directory", at, e))
    };
    let mut here = display.to_path_buf();
    let mut stack: Vec<(rustix::fs::Dir, Option<OsString>)> = vec![(open(top, &here)?, None)];
    while let Some((dir, _)) = stack.last_mut() {
        let entry = match dir.read() {
            None => {
                let Some((done, name)) = stack.pop() else {
                    break;
                };
                drop(done);
                if let (Some(name), Some((parent, _))) = (name, stack.last()) {
                    let pfd = parent
                        .fd()
                        .map_err(|e| io_err("read directory", &here, e))?;
                    match rustix::fs::unlinkat(pfd, &name, AtFlags::REMOVEDIR) {
                        Ok(()) | Err(Errno::NOENT) => {}
                        Err(e) => return Err(io_err("remove directory", &here, e)),
                    }
                    here.pop();
                }
                continue;
            }
            Some(Err(e)) => return Err(io_err("read directory", &here, e)),
            Some(Ok(entry)) => entry,
        };
        let name: &CStr = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let name = OsStr::from_bytes(name.to_bytes()).to_os_string();
        let dfd = dir.fd().map_err(|e| io_err("read directory", &here, e))?;
        let maybe_dir = matches!(
            entry.file_type(),
            rustix::fs::FileType::Directory | rustix::fs::FileType::Unknown
        );
        if !maybe_dir {
            match rustix::fs::unlinkat(dfd, &name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => continue,
                // Became a directory since it was listed: descend below.
                Err(Errno::ISDIR | Errno::PERM) => {}
                Err(e) => return Err(io_err("remove", &here.join(&name), e)),
            }
        }
        match rustix::fs::openat(dfd, &name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => {
                here.push(&name);
                let d = open(fd, &here)?;
                stack.push((d, Some(name)));
            }
            Err(Errno::NOENT) => {}
            // Not a directory (or a symlink swapped in): removed itself, never followed.
            Err(Errno::LOOP | Errno::NOTDIR) => {
                match rustix::fs::unlinkat(dfd, &name, AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(io_err("remove", &here.join(&name), e)),
                }
            }
            Err(e) => return Err(io_err("open directory", &here.join(&name), e)),
        }
    }
    Ok(())
}

/// Removes one file or symlink; a missing path is not an error.
pub fn remove_file(p: &SessionPath) -> Result<()> {
    let Some((dir, name)) = p.parent_at("remove file")? else {
        return Ok(());
    };
    match rustix::fs::unlinkat(&dir, &name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(io_err("remove file", &p.full, e)),
    }
}

/// Removes an empty directory; a missing or non-empty directory is left alone.
pub fn remove_empty_dir(p: &SessionPath) -> Result<bool> {
    let Some((dir, name)) = p.parent_at("remove directory")? else {
        return Ok(false);
    };
    match rustix::fs::unlinkat(&dir, &name, AtFlags::REMOVEDIR) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT | Errno::NOTEMPTY | Errno::EXIST) => Ok(false),
        Err(e) => Err(io_err("remove directory", &p.full, e)),
    }
}

/// Renames within the session. A missing `from` is an [`Error::Io`] whose source is of kind
/// `NotFound`.
pub fn rename(from: &SessionPath, to: &SessionPath) -> Result<()> {
    let (fdir, fname) = from.need_parent("rename")?;
    let (tdir, tname) = to.need_parent("rename")?;
    rustix::fs::renameat(&fdir, &fname, &tdir, &tname).map_err(|e| io_err("rename", &from.full, e))
}

/// Renames `from` to `to` unless `to` exists, atomically (`renameat2` with
/// `RENAME_NOREPLACE`): `Ok(false)` when it exists, so whatever another writer put there is
/// never replaced.
pub fn rename_noreplace(from: &SessionPath, to: &SessionPath) -> Result<bool> {
    let (fdir, fname) = from.need_parent("rename")?;
    let (tdir, tname) = to.need_parent("rename")?;
    rename_noreplace_at(fdir.as_fd(), &fname, tdir.as_fd(), &tname, &to.full)
}

fn rename_noreplace_at(
    fdir: BorrowedFd<'_>,
    fname: &OsStr,
    tdir: BorrowedFd<'_>,
    tname: &OsStr,
    display: &Path,
) -> Result<bool> {
    match rustix::fs::renameat_with(fdir, fname, tdir, tname, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        // A filesystem without RENAME_NOREPLACE: for a file, link(2) is just as exclusive.
        Err(Errno::INVAL | Errno::NOSYS) if !is_dir_at(fdir, fname) => {
            match rustix::fs::linkat(fdir, fname, tdir, tname, AtFlags::empty()) {
                Ok(()) => {
                    rustix::fs::unlinkat(fdir, fname, AtFlags::empty())
                        .map_err(|e| io_err("remove after linking", display, e))?;
                    Ok(true)
                }
                Err(Errno::EXIST) => Ok(false),
                Err(e) => Err(io_err("link into place", display, e)),
            }
        }
        Err(e) => Err(io_err("rename without replacing", display, e)),
    }
}

fn is_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
    })
}

const NEW_FILE: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::EXCL)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Writes `data` to `p` atomically: a temporary file in the same directory is written,
/// fsynced, renamed over `p`, and the directory is fsynced. A crash leaves either the old
/// file or the complete new one, never a partial one.
pub fn write_atomic(p: &SessionPath, data: &[u8]) -> Result<()> {
    write_atomic_with(p, data, true).map(|_| ())
}

/// [`write_atomic`] that never replaces: `Ok(false)` (and nothing written) when `p` exists,
/// also when another writer creates it at the same moment. For files whose presence is a
/// record nobody may overwrite (pending patches).
pub fn write_atomic_new(p: &SessionPath, data: &[u8]) -> Result<bool> {
    write_atomic_with(p, data, false)
}

fn write_atomic_with(p: &SessionPath, data: &[u8], replace: bool) -> Result<bool> {
    let (dir, name) = p.need_parent("create temporary file")?;
    let tmp = tmp_name(".", &name, ".tmp");
    let tmp_full = p.full.with_file_name(&tmp);
    let result = (|| {
        let fd = rustix::fs::openat(&dir, &tmp, NEW_FILE, Mode::from_raw_mode(0o644))
            .map_err(|e| io_err("create temporary file", &tmp_full, e))?;
        let mut f = File::from(fd);
        f.write_all(data).ctx("write", &tmp_full)?;
        f.sync_all().ctx("fsync", &tmp_full)?;
        if replace {
            rustix::fs::renameat(&dir, &tmp, &dir, &name)
                .map_err(|e| io_err("rename into place", &p.full, e))?;
        } else if !rename_noreplace_at(dir.as_fd(), &tmp, dir.as_fd(), &name, &p.full)? {
            return Ok(false);
        }
        let parent = p.full.parent().unwrap_or(Path::new("/"));
        rustix::fs::fsync(&dir).map_err(|e| io_err("fsync directory", parent, e))?;
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
    }
    result
}

/// Creates or truncates `p` and writes `data`, without fsync: for scratch files whose loss in
/// a crash does not matter (an fsync here would flush every dirty page of a fresh copy).
/// A symlink at `p` is refused, never written through.
pub fn write_scratch(p: &SessionPath, data: &[u8]) -> Result<()> {
    let (dir, name) = p.need_parent("write")?;
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(&dir, &name, flags, Mode::from_raw_mode(0o666)) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Err(p.refuse("path is a symlink")),
        Err(e) => return Err(io_err("write", &p.full, e)),
    };
    File::from(fd).write_all(data).ctx("write", &p.full)
}

/// Writes `data` to a temporary name beside `p` and renames it over `p` (no fsync): a
/// reader never sees a partial file, and concurrent writers of the same content are safe.
pub fn write_file_replace(p: &SessionPath, data: &[u8], mode: u32) -> Result<()> {
    write_file_replace_with(p, mode, |f, tmp| {
        f.write_all(data).ctx("write", tmp)?;
        Ok(true)
    })
    .map(|_| ())
}

/// [`write_file_replace`] with the contents written by `fill` (given the open temporary file
/// and its path). When `fill` returns `Ok(false)` the temporary file is removed and `p` left
/// as it was; the result is then `Ok(false)`.
pub fn write_file_replace_with(
    p: &SessionPath,
    mode: u32,
    fill: impl FnOnce(&mut File, &Path) -> Result<bool>,
) -> Result<bool> {
    let (dir, name) = p.need_parent("create temporary file")?;
    let parent = p.full.parent().unwrap_or(Path::new("/"));
    replace_through(dir.as_fd(), &name, &p.full, dir.as_fd(), parent, mode, fill)
}

/// [`write_file_replace_with`] with the temporary file made in `scratch` (a directory of the
/// same session, so on the same filesystem) instead of beside `p`. For trees in which every
/// name is taken for content (the base snapshot): a crash must not leave a temporary file
/// there that recovery would read as a project file.
pub fn write_file_replace_via(
    p: &SessionPath,
    scratch: &SessionPath,
    mode: u32,
    fill: impl FnOnce(&mut File, &Path) -> Result<bool>,
) -> Result<bool> {
    let (dir, name) = p.need_parent("create temporary file")?;
    let sdir = scratch.open_dir("open scratch directory")?;
    replace_through(
        dir.as_fd(),
        &name,
        &p.full,
        sdir.as_fd(),
        &scratch.full,
        mode,
        fill,
    )
}

fn replace_through(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    display: &Path,
    tmp_dir: BorrowedFd<'_>,
    tmp_dir_path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut File, &Path) -> Result<bool>,
) -> Result<bool> {
    let tmp = tmp_name(".tmp-", OsStr::new(""), "");
    let tmp_full = tmp_dir_path.join(&tmp);
    let result = (|| {
        let fd = rustix::fs::openat(tmp_dir, &tmp, NEW_FILE, Mode::from_raw_mode(mode))
            .map_err(|e| io_err("create temporary file", &tmp_full, e))?;
        let mut f = File::from(fd);
        f.set_permissions(fs::Permissions::from_mode(mode))
            .ctx("set mode", &tmp_full)?;
        if !fill(&mut f, &tmp_full)? {
            return Ok(false);
        }
        rustix::fs::renameat(tmp_dir, &tmp, dir, name)
            .map_err(|e| io_err("rename into place", display, e))?;
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        let _ = rustix::fs::unlinkat(tmp_dir, &tmp, AtFlags::empty());
    }
    result
}

/// Creates a symlink at `dst` pointing to `target` (stored as is, never resolved).
pub fn create_symlink(target: &Path, dst: &SessionPath) -> Result<()> {
    let (dir, name) = dst.need_parent("create symlink")?;
    rustix::fs::symlinkat(target, &dir, &name).map_err(|e| io_err("create symlink", &dst.full, e))
}

fn mtime_stamps(mtime: (i64, i64)) -> rustix::fs::Timestamps {
    rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: mtime.0,
            tv_nsec: mtime.1 as _,
        },
    }
}

/// Sets the modification time of `p` without following a symlink at `p`.
pub fn set_mtime(p: &SessionPath, mtime: (i64, i64)) -> Result<()> {
    let (dir, name) = p.need_parent("set mtime")?;
    rustix::fs::utimensat(&dir, &name, &mtime_stamps(mtime), AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| io_err("set mtime", &p.full, e))
}

/// The metadata of what is at `p`, not following a symlink there (`lstat`), read relative
/// to its parent directory opened beneath the session directory.
pub fn symlink_metadata(p: &SessionPath) -> Result<fs::Metadata> {
    let fd = match &p.rel {
        None => p.open_dir("stat")?,
        Some(_) => {
            let (dir, name) = p.need_parent("stat")?;
            metadata_fd(dir.as_fd(), &name).map_err(|e| io_err("stat", &p.full, e))?
        }
    };
    File::from(fd).metadata().ctx("stat", &p.full)
}

/// A descriptor of `name` in `dir` for `fstat` (`O_PATH | O_NOFOLLOW`: a symlink is the link).
fn metadata_fd(dir: BorrowedFd<'_>, name: &OsStr) -> std::result::Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Whether anything (a symlink included) is at `p`. A path through a symlink is refused.
pub fn exists(p: &SessionPath) -> Result<bool> {
    let Some((dir, name)) = p.parent_at("inspect")? else {
        return Ok(false);
    };
    match rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(_) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(io_err("inspect", &p.full, e)),
    }
}

/// Opens (creating) a file for locking and metadata; never truncates, never follows a
/// symlink.
pub fn open_lock_file(p: &SessionPath) -> Result<File> {
    let (dir, name) = p.need_parent("open lock file")?;
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(&dir, &name, flags, Mode::from_raw_mode(0o644)) {
        Ok(fd) => Ok(File::from(fd)),
        Err(Errno::LOOP) => Err(p.refuse("path is a symlink")),
        Err(e) => Err(io_err("open lock file", &p.full, e)),
    }
}

/// The process umask, read once from `/proc/self/status` (calling `umask()` to read it would
/// briefly change it for every thread). Unknown: assume the strictest, so modes are always set.
fn process_umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o777)
    })
}

fn create_file_new_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    display: &Path,
    mode: u32,
) -> Result<File> {
    let fd = rustix::fs::openat(dir, name, NEW_FILE, Mode::from_raw_mode(mode))
        .map_err(|e| io_err("create", display, e))?;
    let f = File::from(fd);
    // The umask may have cleared owner bits of `mode` (those git records); only then is a
    // chmod needed.
    if mode & process_umask() & 0o700 != 0 {
        f.set_permissions(fs::Permissions::from_mode(mode))
            .ctx("set mode", display)?;
    }
    Ok(f)
}

/// Creates a new regular file (it must not exist) with the given permission bits.
pub fn create_file_new(p: &SessionPath, mode: u32) -> Result<File> {
    let (dir, name) = p.need_parent("create")?;
    create_file_new_at(dir.as_fd(), &name, &p.full, mode)
}

// ---- directory handles, for the copy engine ----

/// A directory opened beneath a session directory (no symlink on the way), whose entries
/// are made relative to its descriptor: the copy engine holds one per directory it fills, so
/// a file costs one `openat` of its own name, not a walk of its whole path.
pub struct DirHandle {
    fd: OwnedFd,
    path: PathBuf,
}

impl std::fmt::Debug for DirHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DirHandle").field(&self.path).finish()
    }
}

/// Opens the directory `p` beneath its session directory.
pub fn open_dir(p: &SessionPath) -> Result<DirHandle> {
    Ok(DirHandle {
        fd: p.open_dir("open directory")?,
        path: p.full.clone(),
    })
}

impl DirHandle {
    /// Its path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn refuse(&self, rel: &Path, reason: &'static str) -> Error {
        Error::Containment {
            path: self.path.join(rel),
            base: self.path.clone(),
            reason,
        }
    }

    /// Opens the directory `rel` below this one, following no symlink.
    pub fn open_subdir(&self, rel: &RelPath) -> Result<DirHandle> {
        let path = self.path.join(rel.as_path());
        match open_dir_beneath(self.fd.as_fd(), rel.as_path()) {
            Ok(fd) => Ok(DirHandle { fd, path }),
            Err(Errno::LOOP) => Err(self.refuse(rel.as_path(), "path goes through a symlink")),
            Err(e) => Err(io_err("open directory", &path, e)),
        }
    }

    /// Creates the directories `dirs` (relative to this one) and their missing parents.
    /// Given in path order (every directory's descendants together, as in a sorted node
    /// list), each directory costs one `mkdirat`, plus one `openat` when something is made
    /// inside it; in any order the result is the same, only slower.
    pub fn create_dirs<'a>(&self, dirs: impl IntoIterator<Item = &'a RelPath>) -> Result<()> {
        // The directories of the current path, opened when something was made inside.
        let mut stack: Vec<(OsString, Option<OwnedFd>)> = Vec::new();
        for rel in dirs {
            let comps: Vec<&OsStr> = rel.as_path().iter().collect();
            let common = stack
                .iter()
                .zip(&comps)
                .take_while(|((have, _), want)| have.as_os_str() == **want)
                .count();
            stack.truncate(common);
            for c in &comps[common..] {
                let at = match stack.last_mut() {
                    None => self.fd.as_fd(),
                    Some((_, fd)) => {
                        if fd.is_none() {
                            // Open the parent, by name, from its own parent's descriptor.
                            let n = stack.len();
                            let (name, pfd) = {
                                let pfd = if n >= 2 {
                                    stack[n - 2].1.as_ref().map(|f| f.as_fd())
                                } else {
                                    Some(self.fd.as_fd())
                                };
                                (stack[n - 1].0.clone(), pfd)
                            };
                            let shown: PathBuf = stack.iter().map(|(n, _)| n).collect();
                            let pfd = pfd.ok_or_else(|| {
                                self.refuse(&shown, "parent directory was not opened")
                            })?;
                            let opened =
                                match rustix::fs::openat(pfd, &name, DIR_FLAGS, Mode::empty()) {
                                    Ok(f) => f,
                                    Err(Errno::LOOP) => {
                                        return Err(
                                            self.refuse(&shown, "path goes through a symlink")
                                        )
                                    }
                                    Err(Errno::NOTDIR) if is_symlink_at(pfd, &name) => {
                                        return Err(
                                            self.refuse(&shown, "path goes through a symlink")
                                        )
                                    }
                                    Err(e) => {
                                        return Err(io_err(
                                            "open directory",
                                            &self.path.join(&shown),
                                            e,
                                        ))
                                    }
                                };
                            stack[n - 1].1 = Some(opened);
                        }
                        match stack.last().and_then(|(_, fd)| fd.as_ref()) {
                            Some(fd) => fd.as_fd(),
                            None => return Err(self.refuse(rel.as_path(), "directory not opened")),
                        }
                    }
                };
                match rustix::fs::mkdirat(at, *c, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => {
                        return Err(io_err(
                            "create directory",
                            &self.path.join(rel.as_path()),
                            e,
                        ))
                    }
                }
                stack.push((c.to_os_string(), None));
            }
        }
        Ok(())
    }

    /// Creates the new regular file `name` in this directory (it must not exist).
    pub fn create_file_new(&self, name: &OsStr, mode: u32) -> Result<File> {
        create_file_new_at(self.fd.as_fd(), name, &self.path.join(name), mode)
    }

    /// Creates the symlink `name` → `target` in this directory.
    pub fn create_symlink(&self, target: &Path, name: &OsStr) -> Result<()> {
        rustix::fs::symlinkat(target, &self.fd, name)
            .map_err(|e| io_err("create symlink", &self.path.join(name), e))
    }

    /// Sets the modification time of `name` without following a symlink.
    pub fn set_mtime(&self, name: &OsStr, mtime: (i64, i64)) -> Result<()> {
        rustix::fs::utimensat(
            &self.fd,
            name,
            &mtime_stamps(mtime),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| io_err("set mtime", &self.path.join(name), e))
    }

    /// The `lstat` metadata of `name`.
    pub fn symlink_metadata(&self, name: &OsStr) -> Result<fs::Metadata> {
        let shown = self.path.join(name);
        let fd = metadata_fd(self.fd.as_fd(), name).map_err(|e| io_err("stat", &shown, e))?;
        File::from(fd).metadata().ctx("stat", &shown)
    }

    /// The raw `lstat` of `name` (one `fstatat`, for the copy engine's stat keys).
    pub(crate) fn lstat(&self, name: &OsStr) -> Result<rustix::fs::Stat> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| io_err("stat", &self.path.join(name), e))
    }

    /// Removes the file or symlink `name`; a missing one is not an error.
    pub fn remove_file(&self, name: &OsStr) -> Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io_err("remove file", &self.path.join(name), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A session directory with `sub/` in it, and a victim directory outside.
    fn setup() -> (tempfile::TempDir, SessionDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let s = t.path().canonicalize().unwrap().join("s");
        let victim = t.path().canonicalize().unwrap().join("victim");
        fs::create_dir_all(s.join("sub/inner")).unwrap();
        fs::write(s.join("sub/f"), b"x").unwrap();
        fs::write(s.join("sub/inner/g"), b"y").unwrap();
        fs::create_dir(&victim).unwrap();
        fs::write(victim.join("keep"), b"precious").unwrap();
        fs::create_dir(victim.join("inner")).unwrap();
        fs::write(victim.join("inner/g"), b"precious").unwrap();
        let sd = SessionDir::open(&s).unwrap();
        (t, sd, victim)
    }

    /// Replaces `sub/` by a symlink to the victim, after the path was obtained.
    fn swap(sd: &SessionDir, victim: &Path) {
        let sub = sd.path().join("sub");
        fs::rename(&sub, sd.path().join("moved")).unwrap();
        symlink(victim, &sub).unwrap();
    }

    fn victim_untouched(victim: &Path) {
        let mut names: Vec<_> = fs::read_dir(victim)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["inner", "keep"]);
        assert_eq!(fs::read(victim.join("keep")).unwrap(), b"precious");
        assert_eq!(fs::read(victim.join("inner/g")).unwrap(), b"precious");
        assert_eq!(fs::read_dir(victim.join("inner")).unwrap().count(), 1);
    }

    fn refused<T: std::fmt::Debug>(r: Result<T>) {
        assert!(matches!(r, Err(Error::Containment { .. })), "{r:?}");
    }

    /// Every helper, given a path obtained (and checked) while its parent was a directory,
    /// after the parent was swapped for a symlink to a victim directory.
    #[test]
    fn paths_obtained_before_the_swap_are_refused_by_each_helper() {
        let (_t, sd, victim) = setup();
        let root = sd.join(Path::new("")).unwrap();
        let p = |s: &str| root.child(&RelPath::new(s).unwrap());
        // All obtained (and checked) while sub/ is a directory.
        let keep = sd.join(Path::new("sub/keep")).unwrap();
        let inner = sd.join(Path::new("sub/inner")).unwrap();
        let new = sd.join(Path::new("sub/new")).unwrap();
        let deeper = sd.join(Path::new("sub/new/deeper")).unwrap();
        let here = p("here");
        fs::write(here.as_path(), b"new").unwrap();
        fs::create_dir(sd.path().join("scratch")).unwrap();
        let scratch = p("scratch");
        swap(&sd, &victim);
        refused(create_dir_all(&deeper));
        refused(create_dir_new(&new));
        refused(remove_tree(&inner));
        refused(remove_file(&keep));
        refused(remove_empty_dir(&inner));
        refused(rename(&keep, &p("out")));
        refused(rename(&here, &new));
        refused(rename_noreplace(&here, &new));
        refused(write_atomic(&keep, b"bad"));
        refused(write_atomic_new(&new, b"bad"));
        refused(write_scratch(&keep, b"bad"));
        refused(write_file_replace(&keep, b"bad", 0o644));
        refused(write_file_replace_with(&new, 0o644, |_, _| Ok(true)));
        refused(write_file_replace_via(&new, &scratch, 0o644, |_, _| {
            Ok(true)
        }));
        refused(write_file_replace_via(&p("x"), &inner, 0o644, |_, _| {
            Ok(true)
        }));
        refused(create_symlink(Path::new("/etc"), &new));
        refused(set_mtime(&keep, (1, 0)));
        refused(open_lock_file(&new));
        refused(create_file_new(&new, 0o644));
        refused(symlink_metadata(&keep));
        refused(exists(&keep));
        refused(open_dir(&inner));
        victim_untouched(&victim);
        // The up-front check refuses them too, now.
        refused(sd.join(Path::new("sub/keep")));
        refused(sd.join(Path::new("sub")));
        // The session directory's own files are still reachable.
        assert!(exists(&here).unwrap());
    }

    #[test]
    fn the_walk_without_openat2_refuses_symlinks_too() {
        let (_t, sd, victim) = setup();
        let base = sd.0.fd.as_fd();
        assert!(walk_dir_beneath(base, Path::new("sub/inner")).is_ok());
        assert!(walk_dir_beneath(base, Path::new("")).is_ok());
        swap(&sd, &victim);
        assert_eq!(
            walk_dir_beneath(base, Path::new("sub/inner")).err(),
            Some(Errno::LOOP)
        );
        assert_eq!(
            walk_dir_beneath(base, Path::new("sub")).err(),
            Some(Errno::LOOP)
        );
        assert_eq!(
            walk_dir_beneath(base, Path::new("../x")).err(),
            Some(Errno::XDEV)
        );
        // And openat2 itself, where the kernel has it.
        assert_eq!(
            open_dir_beneath(base, Path::new("sub/inner")).err(),
            Some(Errno::LOOP)
        );
    }

    #[test]
    fn remove_tree_never_follows_a_symlink_inside() {
        let (_t, sd, victim) = setup();
        symlink(&victim, sd.path().join("sub/link")).unwrap();
        symlink(&victim, sd.path().join("sub/inner/link")).unwrap();
        remove_tree(&sd.join(Path::new("sub")).unwrap()).unwrap();
        assert!(!sd.path().join("sub").exists());
        victim_untouched(&victim);
        // A missing tree is not an error.
        remove_tree(&sd.join(Path::new("sub")).unwrap()).unwrap();
    }

    #[test]
    fn the_session_directory_itself_can_be_emptied_and_removed() {
        let (_t, sd, victim) = setup();
        symlink(&victim, sd.path().join("link")).unwrap();
        let me = sd.join(sd.path()).unwrap();
        assert!(!remove_empty_dir(&me).unwrap());
        // Nothing but removal acts on the session directory itself (its parent is the root).
        refused(write_scratch(&me, b"x"));
        refused(rename(&me, &sd.join(Path::new("elsewhere")).unwrap()));
        refused(create_dir_new(&me));
        remove_tree(&me).unwrap();
        assert!(!sd.path().exists());
        victim_untouched(&victim);
    }

    #[test]
    fn dir_handle_makes_directories_and_files_beneath_it() {
        let (_t, sd, victim) = setup();
        let h = open_dir(&sd.join(Path::new("sub")).unwrap()).unwrap();
        let dirs: Vec<RelPath> = ["a", "a/b", "a/b/c", "a/d", "e/f"]
            .iter()
            .map(|s| RelPath::new(s).unwrap())
            .collect();
        h.create_dirs(&dirs).unwrap();
        assert!(sd.path().join("sub/a/b/c").is_dir());
        assert!(sd.path().join("sub/e/f").is_dir());
        let d = h.open_subdir(&RelPath::new("a/b").unwrap()).unwrap();
        d.create_file_new(OsStr::new("x"), 0o755)
            .unwrap()
            .write_all(b"hi")
            .unwrap();
        assert_eq!(fs::read(sd.path().join("sub/a/b/x")).unwrap(), b"hi");
        d.create_symlink(Path::new("x"), OsStr::new("l")).unwrap();
        d.set_mtime(OsStr::new("l"), (7, 0)).unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::mtime(&d.symlink_metadata(OsStr::new("l")).unwrap()),
            7
        );
        // A directory swapped for a symlink is refused, for opening and for making below it.
        symlink(&victim, sd.path().join("sub/e/g")).unwrap();
        refused(h.open_subdir(&RelPath::new("e/g").unwrap()));
        refused(h.create_dirs(&[RelPath::new("e/g/h").unwrap()]));
        victim_untouched(&victim);
    }
}
