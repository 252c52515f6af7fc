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
//! Every check and every walk costs time proportional to its path, whatever its depth:
//! components are split once, the symlink sets are trees walked once, and the walk starts
//! from the deepest directory already open (found by comparing with the walk before, then
//! down a tree of the open directories), never by looking up every prefix.
//!
//! This file holds the checked path type, the check, and the few adapters from the file
//! system layer (`fs::at`, whose `*at` calls the state chokepoint shares) to this
//! chokepoint's errors; the per-phase cache of directory descriptors (`DirScope`) is in
//! `dir_cache`. The reads and writes built on them live in the child module `entries`,
//! which may use the private fields of [`ProjectPath`] and the private adapters but nothing
//! outside this chokepoint.
//!
//! ```
//! use patchbox::fs::project::path_in_project;
//! use patchbox::RelPath;
//! let project = tempfile::tempdir().unwrap();
//! assert!(path_in_project(project.path(), &RelPath::new("src/a.rs").unwrap()).is_ok());
//! assert!(path_in_project(project.path(), &RelPath::new(".git/config").unwrap()).is_err());
//! ```

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::fs::at;
use crate::fs::dotgit::dotgit_alias;
use crate::fs::relpath::{RelPath, RelPathSet};

mod dir_cache;
mod entries;

pub(crate) use dir_cache::DirScope;
use dir_cache::*;

pub(crate) use entries::{
    create_file, create_file_beside, create_symlink, exchange, link_out, list_leaves, make_dir,
    make_dirs, probe_parents, read, read_in, remove_dir_if_empty, remove_file, rename_noreplace,
    root_stamp, set_mtime, set_root_mtime, stamp, sync_fs, sync_root, Data, Entry, Stamp,
    Writeback,
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

    /// The ancestor made of the first `n` components (`1 <= n <= depth`), or `None`. It
    /// passes the checks `self` passed: its components are among `self`'s, and its parents
    /// among `self`'s parents.
    pub(crate) fn ancestor(&self, n: usize) -> Option<ProjectPath> {
        Some(ProjectPath {
            root: self.root.clone(),
            rel: self.rel.ancestor(n)?,
        })
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

/// A path's components, read from its bytes as a walk needs them: counting them is one
/// pass the compiler vectorizes, and a walk that starts below a directory it already holds
/// reads only the components after it. Nothing is split up front, so checking each ancestor
/// of a path thousands of directories deep costs no work per component per ancestor.
pub(super) struct Comps<'a> {
    bytes: &'a [u8],
    /// The path itself: a walk's cursor keeps it (its bytes are shared, not copied) to
    /// know the next path that shares its bytes without comparing them.
    rel: &'a RelPath,
}

impl<'a> Comps<'a> {
    /// The components of `rel` (normal: no empty, `.` or `..` component).
    pub(super) fn of(rel: &'a RelPath) -> Comps<'a> {
        Comps {
            bytes: rel.as_bytes(),
            rel,
        }
    }

    /// Where the parent directories end in the bytes (0 for a top-level name): a walk to
    /// the parent goes through the components ending there or before.
    pub(super) fn parent_end(&self) -> usize {
        memchr::memrchr(b'/', self.bytes).unwrap_or(0)
    }

    /// Where the whole path ends: a walk through every component.
    pub(super) fn whole_end(&self) -> usize {
        self.bytes.len()
    }

    /// The components from the `k`-th on, which starts at byte `off` (0 for the first, one
    /// past a separator otherwise), up to those ending at `limit`: each with its index and
    /// where it ends in the bytes.
    pub(super) fn from(
        &self,
        k: usize,
        off: usize,
        limit: usize,
    ) -> impl Iterator<Item = (usize, &'a [u8], usize)> {
        let bytes = self.bytes.get(..limit).unwrap_or(self.bytes);
        let (mut i, mut pos) = (k, off);
        std::iter::from_fn(move || {
            if pos >= bytes.len() {
                return None;
            }
            let rest = bytes.get(pos..).unwrap_or_default();
            let end = rest
                .iter()
                .position(|&b| b == b'/')
                .map_or(bytes.len(), |j| pos + j);
            let item = (i, bytes.get(pos..end).unwrap_or_default(), end);
            i += 1;
            pos = end + 1;
            Some(item)
        })
    }

    /// The last component.
    pub(super) fn last(&self) -> &'a [u8] {
        match memchr::memrchr(b'/', self.bytes) {
            Some(j) => self.bytes.get(j + 1..).unwrap_or_default(),
            None => self.bytes,
        }
    }

    /// The path up to byte `end` (a component's end) below `root`, for messages.
    pub(super) fn full_to(&self, root: &Path, end: usize) -> PathBuf {
        let b = self.bytes.get(..end).unwrap_or(self.bytes);
        root.join(std::ffi::OsStr::from_bytes(b))
    }

    /// The prefix of the bytes up to `end`.
    pub(super) fn upto(&self, end: usize) -> &'a [u8] {
        self.bytes.get(..end).unwrap_or(self.bytes)
    }
}

/// Which paths count as symlinks for a check: none, those a predicate names, or a set.
#[derive(Clone, Copy)]
enum Links<'a> {
    None,
    Fn(&'a dyn Fn(&RelPath) -> bool),
    Set(&'a RelPathSet),
}

impl Links<'_> {
    /// Whether a proper ancestor of `rel` is one.
    fn any_ancestor(self, rel: &RelPath) -> bool {
        match self {
            Links::None => false,
            Links::Fn(f) => rel.find_ancestor(f).is_some(),
            Links::Set(s) => !s.ancestors_of(rel).is_empty(),
        }
    }

    /// Whether the ancestor of `rel` made of its first `k` components is one.
    fn has(self, rel: &RelPath, k: usize) -> bool {
        match self {
            Links::None => false,
            Links::Fn(f) => rel.ancestor(k).is_some_and(|a| f(&a)),
            Links::Set(s) => rel.ancestor(k).is_some_and(|a| s.contains(&a)),
        }
    }
}

/// The chokepoint. `planned_symlink` tells which paths the patch being applied creates as
/// symlinks: a path below one of them is refused too.
pub(crate) fn check(
    root: &Path,
    rel: &RelPath,
    planned_symlink: &dyn Fn(&RelPath) -> bool,
) -> Result<ProjectPath> {
    check_links(root, rel, Links::Fn(planned_symlink), Links::None)
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
    check_links(
        root,
        rel,
        Links::Fn(planned_symlink),
        Links::Fn(replaced_symlink),
    )
}

/// [`check_with`] with the planned and replaced symlinks as sets (`None`: no such paths):
/// the ancestors of `rel` are looked up in one walk down the sets' trees, so a check costs
/// time proportional to the path whatever its depth.
pub(crate) fn check_sets(
    root: &Path,
    rel: &RelPath,
    planned_symlinks: Option<&RelPathSet>,
    replaced_symlinks: Option<&RelPathSet>,
) -> Result<ProjectPath> {
    check_links(
        root,
        rel,
        planned_symlinks.map_or(Links::None, Links::Set),
        replaced_symlinks.map_or(Links::None, Links::Set),
    )
}

/// Whether any component of `bytes` could be a `.git` alias: one pass over the bytes (which
/// the compiler vectorizes) rules out most paths, so checking every ancestor of a deep path
/// does not cost a call per component per ancestor.
fn may_alias_dotgit(bytes: &[u8]) -> bool {
    memchr::memchr3(b'.', b'g', b'G', bytes).is_some()
        || memchr::memchr(b'\\', bytes).is_some()
        || !bytes.is_ascii()
}

fn check_links(
    root: &Path,
    rel: &RelPath,
    planned: Links<'_>,
    replaced: Links<'_>,
) -> Result<ProjectPath> {
    let c = Comps::of(rel);
    if rel.as_bytes().is_empty() {
        return Err(refuse(root, rel, "path is empty"));
    }
    let limit = c.parent_end();
    let named = names_checked(root, rel);
    let rest = c.upto(c.whole_end()).get(named..).unwrap_or_default();
    if may_alias_dotgit(rest) {
        let off = if named == 0 { 0 } else { named + 1 };
        if let Some(why) = c
            .from(0, off, c.whole_end())
            .find_map(|(_, comp, _)| dotgit_alias(comp))
        {
            return Err(refuse(root, rel, why));
        }
    }
    names_pass(root, rel);
    if planned.any_ancestor(rel) {
        return Err(refuse(
            root,
            rel,
            "path goes through a symlink created by the same patch",
        ));
    }
    let (k, off, mut dir, mut node) = walk_start(root, &c, limit)?;
    for (i, comp, end) in c.from(k, off, limit) {
        let name = cstring(comp).map_err(|e| Error::io("inspect", c.full_to(root, end), e))?;
        // A directory, the usual case, costs one call: opened without following (a symlink
        // fails to open), then what fails is looked at.
        let opened = match openat_dir(dir.as_fd(), &name) {
            Ok(d) => Rc::new(d),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
            Err(open_err) => match fstatat(dir.as_fd(), &name) {
                Err(e) if is_missing(&e) => break,
                Err(e) => return Err(Error::io("inspect", c.full_to(root, end), e)),
                Ok(st) => match st.st_mode & libc::S_IFMT {
                    libc::S_IFLNK => {
                        if replaced.has(rel, i + 1) {
                            break;
                        }
                        return Err(refuse(root, rel, "path goes through a symlink"));
                    }
                    libc::S_IFDIR => {
                        return Err(Error::io("open directory", c.full_to(root, end), open_err))
                    }
                    // A file where a directory is needed: not a containment problem; the
                    // planner reports it.
                    _ => break,
                },
            },
        };
        node = remember(root, node, comp, &opened);
        dir = opened;
    }
    Ok(ProjectPath {
        root: root.to_path_buf(),
        rel: rel.clone(),
    })
}

// ---- adapters over `fs::at` (its errors as `io::Error`, names as `CStr`) ----

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
}

/// Turns the file system layer's error into the one the helpers here report.
fn os_err(e: at::Errno) -> io::Error {
    io::Error::from(e)
}

fn is_missing(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

fn is_symlink_error(e: &io::Error, dir: BorrowedFd<'_>, name: &CStr) -> bool {
    e.raw_os_error()
        .is_some_and(|n| at::is_symlink_error(at::Errno::from_raw_os_error(n), dir, name))
}

fn open_root(root: &Path) -> io::Result<OwnedFd> {
    at::open_path_dir(root).map_err(os_err)
}

fn openat_dir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    at::open_dir(dir, name).map_err(os_err)
}

fn fstatat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<at::Stat> {
    at::lstat(dir, name).map_err(os_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A walk thousands of directories deep keeps at most `MAX_OPEN` descriptors, finds
    /// every ancestor in turn (as the write phase asks for them), and forgets a renamed
    /// directory with everything below it.
    #[test]
    fn deep_walks_keep_few_descriptors_and_forget_renamed_directories() {
        let project = tempfile::tempdir().unwrap();
        let root = project.path();
        let depth = 600;
        let deep = |n: usize, leaf: &str| format!("{}{leaf}", "d/".repeat(n));
        std::fs::create_dir_all(root.join(deep(depth, ""))).unwrap();
        for n in [0, 1, 300, depth] {
            std::fs::write(root.join(deep(n, "f")), n.to_string()).unwrap();
        }
        let rel = |s: &str| RelPath::new(s).unwrap();
        let _scope = DirScope::enter(root).unwrap();
        for n in [depth, 0, 300, 1, depth] {
            let p = check(root, &rel(&deep(n, "f")), &|_| false).unwrap();
            match read(&p).unwrap() {
                Entry::File { data, .. } => assert_eq!(*data, n.to_string().into_bytes()),
                e => panic!("{n}: {e:?}"),
            }
            assert!(open_in_scope() <= MAX_OPEN, "{}", open_in_scope());
        }
        for n in 1..=depth {
            let p = check(root, &rel(deep(n, "").trim_end_matches('/')), &|_| false).unwrap();
            assert!(
                matches!(stamp(&p).unwrap(), Some(st) if st.mode & libc::S_IFMT == libc::S_IFDIR)
            );
        }
        assert!(open_in_scope() <= MAX_OPEN);
        // Rename d/d away: below it nothing is found any more (nothing stale is reused).
        let from = check(root, &rel("d/d"), &|_| false).unwrap();
        let to = check(root, &rel("moved"), &|_| false).unwrap();
        rename_noreplace(&from, &to).unwrap();
        let p = check(root, &rel(&deep(depth, "f")), &|_| false).unwrap();
        assert_eq!(read(&p).unwrap(), Entry::Absent);
        let p = check(
            root,
            &rel(&format!("moved/{}", deep(depth - 2, "f"))),
            &|_| false,
        )
        .unwrap();
        assert!(matches!(read(&p).unwrap(), Entry::File { .. }));
        let p = check(root, &rel("d/f"), &|_| false).unwrap();
        assert!(matches!(read(&p).unwrap(), Entry::File { .. }));
    }

    /// A file staged beside its destination has its content, mode and mtime, is allocated
    /// on the destination directory's filesystem and leaves nothing there (`O_TMPFILE`);
    /// it never replaces an existing name, and without a destination directory (or with a
    /// symlink where it would be) it is made where it is named.
    #[test]
    fn staged_beside_the_destination_is_complete_and_leaves_nothing_there() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let project = tempfile::tempdir().unwrap();
        let root = project.path();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir(root.join("stage")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("link")).unwrap();
        let rel = |s: &str| RelPath::new(s).unwrap();
        let p = |s: &str| check(root, &rel(s), &|_| false).unwrap();
        let _scope = DirScope::enter(root).unwrap();
        let before = std::fs::metadata(root.join("src/deep"))
            .unwrap()
            .mtime_nsec();
        for (i, beside) in ["src/deep/f.c", "new/dir/g.c"].iter().enumerate() {
            let s = p(&format!("stage/s{i}"));
            let t = check(root, &rel(beside), &|_| false).unwrap();
            create_file_beside(
                &s,
                &t,
                b"data\n",
                0o755,
                Some(crate::fs::Timestamp::new(1_000_000, 5)),
                Writeback::Start,
            )
            .unwrap();
            let m = std::fs::symlink_metadata(root.join(format!("stage/s{i}"))).unwrap();
            assert_eq!(
                std::fs::read(root.join(format!("stage/s{i}"))).unwrap(),
                b"data\n"
            );
            assert_eq!(m.permissions().mode() & 0o7777, 0o755);
            assert_eq!((m.mtime(), m.mtime_nsec()), (1_000_000, 5));
            assert_eq!(m.nlink(), 1);
        }
        // Nothing was named in the destination directory, nor was it touched.
        assert_eq!(std::fs::read_dir(root.join("src/deep")).unwrap().count(), 0);
        assert_eq!(
            std::fs::metadata(root.join("src/deep"))
                .unwrap()
                .mtime_nsec(),
            before
        );
        // An existing name is refused, and kept.
        let t = p("src/deep/f.c");
        let e = create_file_beside(&p("stage/s0"), &t, b"other", 0o644, None, Writeback::Leave)
            .unwrap_err();
        assert!(e.to_string().contains("exists"), "{e}");
        assert_eq!(std::fs::read(root.join("stage/s0")).unwrap(), b"data\n");
        // A destination below a symlink: staged all the same, nothing written through it.
        let under_link = ProjectPath {
            root: root.to_path_buf(),
            rel: rel("link/x.c"),
        };
        create_file_beside(
            &p("stage/s2"),
            &under_link,
            b"x",
            0o644,
            None,
            Writeback::Start,
        )
        .unwrap();
        assert_eq!(std::fs::read(root.join("stage/s2")).unwrap(), b"x");
    }
}
