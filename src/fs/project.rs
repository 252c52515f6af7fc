//! The project chokepoint: the only way to name a path in the user's project for writing,
//! and the walk every file system call there starts with.
//!
//! Every path the apply engine writes is a [`ProjectPath`], built only by `check` (exposed as
//! [`path_in_project`]), and every write goes through a helper (in `entries`, re-exported
//! here) that walks from the project root with `openat(O_NOFOLLOW | O_DIRECTORY)` per
//! component. The invariant this module keeps: no call made through it follows a symlink
//! at any parent component, whenever that symlink appeared, and none reaches a `.git`
//! directory. The check refuses such paths up front; the descriptor walk refuses them again
//! at the moment of the call, so a directory swapped for a symlink after the check still
//! cannot redirect a read or a write.
//!
//! This file holds the checked path type, the check, the per-phase cache of directory
//! descriptors (`DirScope`) and the raw system call wrappers they share. The reads and
//! writes built on them live in the child module `entries`, which may use the private
//! fields of [`ProjectPath`] and the private wrappers but nothing outside this chokepoint.
//!
//! ```
//! use patchbox::fs::project::path_in_project;
//! use patchbox::RelPath;
//! let project = tempfile::tempdir().unwrap();
//! assert!(path_in_project(project.path(), &RelPath::new("src/a.rs").unwrap()).is_ok());
//! assert!(path_in_project(project.path(), &RelPath::new(".git/config").unwrap()).is_err());
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::fs::dotgit::dotgit_alias;
use crate::fs::relpath::RelPath;

mod entries;

pub(crate) use entries::{
    create_file, create_symlink, link_out, list_leaves, make_dir, read, read_in,
    remove_dir_if_empty, remove_file, rename_noreplace, root_stamp, set_mtime, set_root_mtime,
    stamp, sync_fs, sync_root, Data, Entry, Stamp,
};

/// A path inside the project that passed the containment checks of [`path_in_project`].
///
/// It can only be built by [`path_in_project`]; every file system helper of the apply
/// engine that writes takes one, so a write to an unchecked path does not compile.
///
/// ```
/// use patchbox::fs::project::path_in_project;
/// use patchbox::RelPath;
/// let project = tempfile::tempdir().unwrap();
/// let p = path_in_project(project.path(), &RelPath::new("src/a.rs").unwrap()).unwrap();
/// assert_eq!(p.rel().to_string(), "src/a.rs");
/// assert_eq!(p.to_path_buf(), project.path().join("src/a.rs"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectPath {
    root: PathBuf,
    rel: RelPath,
}

impl ProjectPath {
    /// The path relative to the project root.
    pub fn rel(&self) -> &RelPath {
        &self.rel
    }

    /// The project root it was checked against.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The full path (for messages; the engine never opens it in one piece).
    pub fn to_path_buf(&self) -> PathBuf {
        self.root.join(self.rel.as_path())
    }
}

/// Checks that `rel` may be written inside `project_dir` and returns it as a
/// [`ProjectPath`].
///
/// Refused with [`Error::Containment`]: any component named `.git` (in any letter case) or
/// that another file system reads as `.git` (NTFS: trailing dots or spaces, `:` streams,
/// `GIT~1`, a backslash before it; HFS+: ignorable code points such as U+200C; git's
/// `verify_path` rules), and any path whose parent directories include a symlink (checked with `lstat` from the
/// project root, never following links). The last component may itself be a symlink:
/// the engine replaces such a link, it never writes through it. `..` and absolute paths
/// cannot be [`RelPath`]s in the first place.
///
/// ```
/// use patchbox::fs::project::path_in_project;
/// use patchbox::RelPath;
/// let project = tempfile::tempdir().unwrap();
/// let outside = tempfile::tempdir().unwrap();
/// std::os::unix::fs::symlink(outside.path(), project.path().join("link")).unwrap();
/// assert!(path_in_project(project.path(), &RelPath::new("src/lib.rs").unwrap()).is_ok());
/// assert!(path_in_project(project.path(), &RelPath::new("link").unwrap()).is_ok());
/// assert!(path_in_project(project.path(), &RelPath::new("link/x").unwrap()).is_err());
/// assert!(path_in_project(project.path(), &RelPath::new(".git/config").unwrap()).is_err());
/// ```
pub fn path_in_project(project_dir: &Path, rel: &RelPath) -> Result<ProjectPath> {
    check(project_dir, rel, &|_| false)
}

fn refuse(root: &Path, rel: &RelPath, reason: &'static str) -> Error {
    Error::Containment {
        path: rel.as_path().to_path_buf(),
        base: root.to_path_buf(),
        reason,
    }
}

fn comps(rel: &RelPath) -> Vec<&[u8]> {
    rel.as_path()
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.as_bytes()),
            _ => None,
        })
        .collect()
}

/// The chokepoint. `planned_symlink` tells which paths the patch being applied creates as
/// symlinks: a path below one of them is refused too.
pub(crate) fn check(
    root: &Path,
    rel: &RelPath,
    planned_symlink: &dyn Fn(&RelPath) -> bool,
) -> Result<ProjectPath> {
    check_with(root, rel, planned_symlink, &|_| false)
}

/// [`check`], where a symlink in the project that the same patch deletes
/// (`replaced_symlink`) counts as a directory still to be created, not as a symlink to go
/// through. Safe because every write walks the path again with `O_NOFOLLOW`: if the link
/// is still there at write time the write is refused.
pub(crate) fn check_with(
    root: &Path,
    rel: &RelPath,
    planned_symlink: &dyn Fn(&RelPath) -> bool,
    replaced_symlink: &dyn Fn(&RelPath) -> bool,
) -> Result<ProjectPath> {
    let cs = comps(rel);
    if cs.is_empty() {
        return Err(refuse(root, rel, "path is empty"));
    }
    if let Some(why) = cs.iter().find_map(|c| dotgit_alias(c)) {
        return Err(refuse(root, rel, why));
    }
    let mut anc = PathBuf::new();
    for c in &cs[..cs.len() - 1] {
        anc.push(std::ffi::OsStr::from_bytes(c));
        if let Ok(a) = RelPath::new(&anc) {
            if planned_symlink(&a) {
                return Err(refuse(
                    root,
                    rel,
                    "path goes through a symlink created by the same patch",
                ));
            }
        }
    }
    let mut dir = root_fd(root)?;
    let mut here = root.to_path_buf();
    let mut anc = PathBuf::new();
    for c in &cs[..cs.len() - 1] {
        let name = cstring(c).map_err(|e| Error::io("inspect", &here, e))?;
        here.push(std::ffi::OsStr::from_bytes(c));
        anc.push(std::ffi::OsStr::from_bytes(c));
        // Reached before in this scope with the same checks: a directory.
        if let Some(fd) = cached(root, &anc) {
            dir = fd;
            continue;
        }
        match fstatat(dir.as_fd(), &name) {
            Err(e) if is_missing(&e) => break,
            Err(e) => return Err(Error::io("inspect", &here, e)),
            Ok(st) => match st.st_mode & libc::S_IFMT {
                libc::S_IFLNK => {
                    if RelPath::new(&anc).is_ok_and(|a| replaced_symlink(&a)) {
                        break;
                    }
                    return Err(refuse(root, rel, "path goes through a symlink"));
                }
                libc::S_IFDIR => {
                    dir = match openat_dir(dir.as_fd(), &name) {
                        Ok(d) => Rc::new(d),
                        Err(e) if is_symlink_error(&e, dir.as_fd(), &name) => {
                            return Err(refuse(root, rel, "path goes through a symlink"))
                        }
                        Err(e) => return Err(Error::io("open directory", &here, e)),
                    };
                    remember(root, &anc, &dir);
                }
                // A file where a directory is needed: not a containment problem; the
                // planner reports it.
                _ => break,
            },
        }
    }
    Ok(ProjectPath {
        root: root.to_path_buf(),
        rel: rel.clone(),
    })
}

// ---- directory descriptors ----

/// Directory descriptors opened during one phase of an apply (planning, or writing), by
/// path below the root. Each was reached component by component with `O_NOFOLLOW`, so it
/// names a directory that was inside the project when it was opened, and nothing done
/// through it follows a symlink swapped in later. Removing or renaming a directory evicts
/// it and everything below it.
struct DirCache {
    root: PathBuf,
    root_fd: Rc<OwnedFd>,
    dirs: HashMap<PathBuf, Rc<OwnedFd>>,
}

thread_local! {
    static CACHE: RefCell<Option<DirCache>> = const { RefCell::new(None) };
}

/// While alive, this thread's helpers reuse directory descriptors below `root`: one
/// `openat` per directory per phase, instead of one per component on every call. Each
/// phase opens its own scope, so the write phase walks the project afresh.
pub(crate) struct DirScope {
    prev: Option<DirCache>,
}

impl DirScope {
    pub(crate) fn enter(root: &Path) -> Result<DirScope> {
        let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
        let cache = DirCache {
            root: root.to_path_buf(),
            root_fd: Rc::new(fd),
            dirs: HashMap::new(),
        };
        let prev = CACHE.with(|c| c.borrow_mut().replace(cache));
        Ok(DirScope { prev })
    }
}

impl Drop for DirScope {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CACHE.with(|c| *c.borrow_mut() = prev);
    }
}

/// The cached descriptor of `key` below `root` (`""` is the root itself).
fn cached(root: &Path, key: &Path) -> Option<Rc<OwnedFd>> {
    CACHE.with(|c| {
        let c = c.borrow();
        let d = c.as_ref().filter(|d| d.root == root)?;
        if key.as_os_str().is_empty() {
            Some(Rc::clone(&d.root_fd))
        } else {
            d.dirs.get(key).cloned()
        }
    })
}

fn remember(root: &Path, key: &Path, fd: &Rc<OwnedFd>) {
    CACHE.with(|c| {
        if let Some(d) = c.borrow_mut().as_mut().filter(|d| d.root == root) {
            d.dirs.insert(key.to_path_buf(), Rc::clone(fd));
        }
    });
}

/// Forgets `rel` and everything below it (it was removed or renamed).
fn evict(root: &Path, rel: &RelPath) {
    CACHE.with(|c| {
        if let Some(d) = c.borrow_mut().as_mut().filter(|d| d.root == root) {
            // Every walk caches each directory it passes, so nothing below an uncached
            // path is cached: most calls (files) return here.
            let gone = rel.as_path();
            if d.dirs.contains_key(gone) {
                d.dirs.retain(|k, _| !k.starts_with(gone));
            }
        }
    });
}

/// The root's descriptor: cached in a scope, else opened.
fn root_fd(root: &Path) -> Result<Rc<OwnedFd>> {
    match cached(root, Path::new("")) {
        Some(fd) => Ok(fd),
        None => Ok(Rc::new(
            open_root(root).map_err(|e| Error::io("open directory", root, e))?,
        )),
    }
}

// ---- raw syscalls ----

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
}

fn fd_result(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: `fd` is a freshly opened descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

fn rc(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn is_missing(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

fn is_symlink_error(e: &io::Error, dir: BorrowedFd<'_>, name: &CStr) -> bool {
    match e.raw_os_error() {
        Some(libc::ELOOP) => true,
        Some(libc::ENOTDIR) => {
            fstatat(dir, name).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
        }
        _ => false,
    }
}

fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let c = cstring(root.as_os_str().as_bytes())?;
    // SAFETY: valid NUL-terminated path.
    fd_result(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })
}

fn openat_dir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: valid fd and NUL-terminated name.
    fd_result(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })
}

fn fstatat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter; fd and name are valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    rc(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

fn timespec(t: (i64, i64)) -> libc::timespec {
    // SAFETY: timespec is plain data; zeroed is valid.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    ts.tv_sec = t.0 as libc::time_t;
    ts.tv_nsec = t.1 as _;
    ts
}
