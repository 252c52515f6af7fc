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
use std::collections::{HashMap, VecDeque};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::fs::dotgit::dotgit_alias;
use crate::fs::relpath::{RelPath, RelPathSet};

mod entries;

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

// ---- directory descriptors ----

/// Most directory descriptors a scope keeps open: a path thousands of directories deep
/// would otherwise hold one per level, past the usual limit of 1,024 per process. The
/// least recently used are closed first (and opened again from the deepest one still open
/// when needed).
const MAX_OPEN: usize = 256;

/// One directory reached in this scope.
struct DirNode {
    /// Its descriptor, while open.
    fd: Option<Rc<OwnedFd>>,
    children: HashMap<Box<[u8]>, usize>,
    /// When it was last used (for closing the least recently used).
    used: u64,
    /// Kept open while the scope lasts (see [`PIN_EVERY`]).
    pinned: bool,
}

/// Every this many levels down a walk (at first), a directory is kept open instead of
/// taking its turn to be closed: going back up a chain deeper than [`MAX_OPEN`] (removing a
/// deep path's directories bottom-up) then reopens only the levels below the nearest kept
/// one, not the whole chain from the root each time. When half of `MAX_OPEN` are kept, the
/// spacing doubles (every other one is let go), so a chain of any depth keeps at most that
/// many, and going up it reopens each level about twice.
const PIN_EVERY: usize = 32;

/// Directory descriptors opened during one phase of an apply (planning, or writing), as a
/// tree of the directories below the root. Each was reached component by component with
/// `O_NOFOLLOW`, so it names a directory that was inside the project when it was opened,
/// and nothing done through it follows a symlink swapped in later. Removing or renaming a
/// directory evicts it and everything below it.
///
/// Finding where a walk can start costs time proportional to the path, never to its length
/// times its depth: the walk before is kept (`cursor`), and a path sharing a prefix with it
/// (the next file in the same directory, the next ancestor of a deep path) starts from
/// there after one comparison of bytes; only the components after the shared prefix are
/// looked up in the tree.
struct DirCache {
    root: PathBuf,
    /// Node 0 is the root (always open).
    nodes: Vec<DirNode>,
    /// Nodes by the time they were used; stale entries (used again since) are skipped.
    lru: VecDeque<(usize, u64)>,
    clock: u64,
    open: usize,
    /// The nodes of the last walk's directories, from the top, and their path's bytes.
    cursor: Vec<usize>,
    cursor_path: Vec<u8>,
    /// A path `cursor_path` is a prefix of (the last one walked), when known: a path that
    /// is a prefix of the same bytes (the next directory up or down a chain) shares all of
    /// the shorter of the two with the cursor, found without comparing bytes; the
    /// directories of a chain thousands deep are then walked in time proportional to the
    /// chain, not to its length times its depth.
    cursor_src: Option<RelPath>,
    /// The last path whose every name was found free of `.git` aliases (see
    /// [`names_checked`]).
    names_passed: Option<RelPath>,
    /// Where each of the cursor's components ends in `cursor_path`.
    cursor_ends: Vec<usize>,
    /// The nodes below the root kept open, with their depth (see [`PIN_EVERY`]).
    pins: Vec<(usize, usize)>,
    /// The current spacing of kept nodes.
    pin_every: usize,
}

thread_local! {
    static CACHE: RefCell<Option<DirCache>> = const { RefCell::new(None) };
}

/// While alive, this thread's helpers reuse directory descriptors below `root`: one
/// `openat` per directory per phase (while at most [`MAX_OPEN`] are open), instead of one
/// per component on every call. Each phase opens its own scope, so the write phase walks
/// the project afresh.
pub(crate) struct DirScope {
    prev: Option<DirCache>,
}

impl DirScope {
    pub(crate) fn enter(root: &Path) -> Result<DirScope> {
        let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
        let cache = DirCache {
            root: root.to_path_buf(),
            nodes: vec![DirNode {
                fd: Some(Rc::new(fd)),
                children: HashMap::new(),
                used: 0,
                pinned: true,
            }],
            lru: VecDeque::new(),
            clock: 0,
            open: 0,
            cursor: Vec::new(),
            cursor_path: Vec::new(),
            cursor_src: None,
            names_passed: None,
            cursor_ends: Vec::new(),
            pins: Vec::new(),
            pin_every: PIN_EVERY,
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

/// Length of the common prefix of `a` and `b` (compared a block at a time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 64 <= n && a[i..i + 64] == b[i..i + 64] {
        i += 64;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// How many of `ends` (increasing) are at most `common`, searched from the last one
/// outwards: a walk beside the last one (the next directory up or down a chain) shares
/// nearly all of it, found in a few steps wherever the chain's end is, instead of a binary
/// search over every level of it.
fn ends_upto(ends: &[usize], common: usize) -> usize {
    // Everything from `hi` on is past `common`.
    let (mut hi, mut step) = (ends.len(), 1);
    loop {
        let lo = hi.saturating_sub(step);
        let below = ends
            .get(..lo)
            .and_then(|b| b.last())
            .is_none_or(|&e| e <= common);
        if below {
            let rest = ends.get(lo..hi).unwrap_or_default();
            return lo + rest.partition_point(|&e| e <= common);
        }
        hi = lo - 1;
        step *= 2;
    }
}

impl DirCache {
    fn touch(&mut self, k: usize) {
        self.clock += 1;
        if let Some(node) = self.nodes.get_mut(k) {
            node.used = self.clock;
        }
        if k != 0 {
            self.lru.push_back((k, self.clock));
        }
    }

    /// Closes the least recently used descriptors beyond [`MAX_OPEN`].
    fn trim(&mut self) {
        while self.open > MAX_OPEN {
            let Some((k, t)) = self.lru.pop_front() else {
                break;
            };
            if let Some(node) = self.nodes.get_mut(k) {
                if node.used == t && !node.pinned && node.fd.take().is_some() {
                    self.open -= 1;
                }
            }
        }
        // Stale entries pile up when nothing needs closing: drop them now and then.
        if self.lru.len() > 8 * MAX_OPEN + 64 {
            let nodes = &self.nodes;
            self.lru
                .retain(|&(k, t)| nodes.get(k).is_some_and(|n| n.used == t && n.fd.is_some()));
        }
    }

    /// How many of the components of `c` ending at `limit` or before the last walk
    /// (`cursor`) covers: one comparison of bytes, then a binary search of the cursor's
    /// component ends.
    fn shared(&self, c: &Comps<'_>, limit: usize) -> usize {
        // Both prefixes of the same bytes (held alive by `cursor_src` and by `c`): they
        // agree up to the shorter one's end.
        let same = self
            .cursor_src
            .as_ref()
            .is_some_and(|s| s.as_bytes().as_ptr() == c.bytes.as_ptr());
        let common = if same {
            self.cursor_path.len().min(limit.min(c.bytes.len()))
        } else {
            common_prefix(&self.cursor_path, c.upto(limit))
        };
        let mut k = ends_upto(&self.cursor_ends, common);
        // A component of this path that merely starts with the walk's is not shared.
        if k > 0
            && self.cursor_ends.get(k - 1) == Some(&common)
            && common < limit
            && c.upto(limit).get(common) != Some(&b'/')
        {
            k -= 1;
        }
        k
    }

    /// Keeps the first `k` components of the cursor.
    fn truncate_cursor(&mut self, k: usize) {
        self.cursor.truncate(k);
        self.cursor_ends.truncate(k);
        let end = self.cursor_ends.last().copied().unwrap_or(0);
        self.cursor_path.truncate(end);
    }

    /// Extends the cursor by the directory `name`, node `node`.
    fn push_cursor(&mut self, node: usize, name: &[u8]) {
        if !self.cursor_path.is_empty() {
            self.cursor_path.push(b'/');
        }
        // Still a prefix of the path it came from only if `name` is that path's next
        // component (a walk of that path adds its own components).
        let at = self.cursor_path.len();
        let follows = self.cursor_src.as_ref().is_some_and(|s| {
            let b = s.as_bytes();
            b.get(at..at + name.len()) == Some(name)
                && b.get(at + name.len()).is_none_or(|&x| x == b'/')
        });
        if !follows {
            self.cursor_src = None;
        }
        self.cursor_path.extend_from_slice(name);
        self.cursor.push(node);
        self.cursor_ends.push(self.cursor_path.len());
    }

    /// Where the component after the cursor starts in a path that shares it.
    fn cursor_next(&self) -> usize {
        self.cursor_ends.last().map_or(0, |e| e + 1)
    }

    /// The deepest open directory among the components of `c` ending at `limit` or
    /// before: how many components it covers, where the next one starts, its descriptor
    /// and node.
    fn start(&mut self, c: &Comps<'_>, limit: usize) -> (usize, usize, Rc<OwnedFd>, usize) {
        let k = self.shared(c, limit);
        self.truncate_cursor(k);
        // The cursor is now a prefix of `c`, and grows along it.
        self.cursor_src = Some(c.rel.clone());
        // Further down the tree.
        let mut node = self.cursor.last().copied().unwrap_or(0);
        for (_, comp, _) in c.from(k, self.cursor_next(), limit) {
            let Some(&next) = self.nodes.get(node).and_then(|d| d.children.get(comp)) else {
                break;
            };
            self.push_cursor(next, comp);
            node = next;
        }
        // The deepest one still open.
        while let Some(&top) = self.cursor.last() {
            if let Some(fd) = self.nodes.get(top).and_then(|d| d.fd.clone()) {
                self.touch(top);
                return (self.cursor.len(), self.cursor_next(), fd, top);
            }
            self.truncate_cursor(self.cursor.len() - 1);
        }
        let root = self.nodes.first().and_then(|d| d.fd.clone());
        match root {
            Some(fd) => (0, 0, fd, 0),
            // Node 0 always holds the root; never reached.
            None => (0, 0, Rc::new(self.reopen_root()), 0),
        }
    }

    #[cold]
    fn reopen_root(&mut self) -> OwnedFd {
        match open_root(&self.root) {
            Ok(fd) => fd,
            Err(_) => std::process::abort(),
        }
    }

    /// Keeps node `k`, `depth` levels down, open; at half of [`MAX_OPEN`] kept, doubles the
    /// spacing and lets go of those off it.
    fn pin(&mut self, k: usize, depth: usize) {
        self.pins
            .retain(|&(n, _)| self.nodes.get(n).is_some_and(|d| d.pinned));
        if self.pins.len() >= MAX_OPEN / 2 {
            self.pin_every *= 2;
            let every = self.pin_every;
            let (keep, drop): (Vec<_>, Vec<_>) =
                self.pins.iter().partition(|&&(_, dp)| dp % every == 0);
            self.pins = keep;
            for (n, _) in drop {
                if let Some(d) = self.nodes.get_mut(n) {
                    d.pinned = false;
                    if d.fd.take().is_some() {
                        self.open -= 1;
                    }
                }
            }
            if !depth.is_multiple_of(every) {
                return;
            }
        }
        if let Some(d) = self.nodes.get_mut(k).filter(|d| !d.pinned) {
            d.pinned = true;
            self.pins.push((k, depth));
        }
    }

    /// Records `fd` as the directory `name` below `parent`; returns its node.
    fn remember(&mut self, parent: usize, name: &[u8], fd: &Rc<OwnedFd>) -> usize {
        let existing = self.nodes.get(parent).and_then(|d| d.children.get(name));
        let k = match existing {
            Some(&k) => k,
            None => {
                let k = self.nodes.len();
                self.nodes.push(DirNode {
                    fd: None,
                    children: HashMap::new(),
                    used: 0,
                    pinned: false,
                });
                if let Some(d) = self.nodes.get_mut(parent) {
                    d.children.insert(name.into(), k);
                }
                k
            }
        };
        if let Some(d) = self.nodes.get_mut(k) {
            if d.fd.replace(Rc::clone(fd)).is_none() {
                self.open += 1;
            }
        }
        self.touch(k);
        if self.cursor.last().copied().unwrap_or(0) == parent {
            self.push_cursor(k, name);
            let depth = self.cursor.len();
            if depth.is_multiple_of(self.pin_every) {
                self.pin(k, depth);
            }
        }
        self.trim();
        k
    }

    /// Forgets `rel` and everything below it.
    fn evict(&mut self, rel: &RelPath) {
        let c = Comps::of(rel);
        if rel.as_bytes().is_empty() {
            return;
        }
        let limit = c.parent_end();
        // The parent's node from the last walk where it covers it: removing a deep chain
        // of directories bottom-up then costs one comparison per directory, not a lookup
        // of each of its ancestors.
        let k = self.shared(&c, limit);
        let mut node = k
            .checked_sub(1)
            .and_then(|i| self.cursor.get(i))
            .copied()
            .unwrap_or(0);
        let off = k
            .checked_sub(1)
            .and_then(|i| self.cursor_ends.get(i))
            .map_or(0, |e| e + 1);
        // Whether the cursor holds the whole parent.
        let covers = k
            .checked_sub(1)
            .and_then(|i| self.cursor_ends.get(i))
            .map_or(limit == 0, |&e| e == limit);
        for (_, comp, _) in c.from(k, off, limit) {
            match self.nodes.get(node).and_then(|d| d.children.get(comp)) {
                Some(&k) => node = k,
                // Every walk records each directory it passes, so nothing below an
                // unknown directory is known: most calls (files) return here.
                None => return,
            }
        }
        let Some(gone) = self
            .nodes
            .get_mut(node)
            .and_then(|d| d.children.remove(c.last()))
        else {
            return;
        };
        let mut stack = vec![gone];
        while let Some(below) = stack.pop() {
            if let Some(d) = self.nodes.get_mut(below) {
                if d.fd.take().is_some() {
                    self.open -= 1;
                }
                d.pinned = false;
                stack.extend(d.children.drain().map(|(_, v)| v));
            }
        }
        // The last walk stays valid above the removed directory; it only went through it
        // if it covers the whole parent and holds that very node next.
        if covers && self.cursor.get(k) == Some(&gone) {
            self.truncate_cursor(k);
        }
    }
}

/// How many leading bytes of `rel` (whole components) this thread's scope for `root` has
/// already found free of `.git` aliases: all of them when `rel` is a prefix of the same
/// bytes as the last path that passed (an ancestor of it, checked next when a deep chain
/// of directories is walked bottom-up), none otherwise. Checking every directory of such
/// a chain then reads each name once, not once per directory below it.
fn names_checked(root: &Path, rel: &RelPath) -> usize {
    CACHE.with(|cell| {
        let b = cell.borrow();
        let Some(passed) = b
            .as_ref()
            .filter(|d| d.root == root)
            .and_then(|d| d.names_passed.as_ref())
        else {
            return 0;
        };
        let (p, r) = (passed.as_bytes(), rel.as_bytes());
        // The same bytes (both held alive here): they agree up to the shorter end, which
        // is the end of a component of both.
        if p.as_ptr() == r.as_ptr() {
            p.len().min(r.len())
        } else {
            0
        }
    })
}

/// Remembers that every name of `rel` is free of `.git` aliases (see [`names_checked`]),
/// unless a longer path of the same bytes already passed.
fn names_pass(root: &Path, rel: &RelPath) {
    CACHE.with(|cell| {
        if let Some(d) = cell.borrow_mut().as_mut().filter(|d| d.root == root) {
            let longer = d.names_passed.as_ref().is_some_and(|p| {
                p.as_bytes().as_ptr() == rel.as_bytes().as_ptr()
                    && p.as_bytes().len() >= rel.as_bytes().len()
            });
            if !longer {
                d.names_passed = Some(rel.clone());
            }
        }
    });
}

/// Where a walk down the components of `c` ending at `limit` or before starts (`limit`:
/// [`Comps::parent_end`] or [`Comps::whole_end`]): the deepest directory among
/// them open in this thread's scope for `root` (or the root, opened afresh without a
/// scope). Returns how many components that directory covers, where the next one starts in
/// the bytes, its descriptor, and its node
/// for [`remember`] (`None` without a scope).
pub(super) fn walk_start(
    root: &Path,
    c: &Comps<'_>,
    limit: usize,
) -> Result<(usize, usize, Rc<OwnedFd>, Option<usize>)> {
    let hit = CACHE.with(|cell| {
        let mut b = cell.borrow_mut();
        let d = b.as_mut().filter(|d| d.root == root)?;
        let (k, off, fd, node) = d.start(c, limit);
        Some((k, off, fd, Some(node)))
    });
    match hit {
        Some(x) => Ok(x),
        None => Ok((
            0,
            0,
            Rc::new(open_root(root).map_err(|e| Error::io("open directory", root, e))?),
            None,
        )),
    }
}

/// Records `fd` as the directory `name` below the directory `parent` (a node from
/// [`walk_start`] or from a previous call); returns its node.
pub(super) fn remember(
    root: &Path,
    parent: Option<usize>,
    name: &[u8],
    fd: &Rc<OwnedFd>,
) -> Option<usize> {
    let parent = parent?;
    CACHE.with(|c| {
        let mut b = c.borrow_mut();
        let d = b.as_mut().filter(|d| d.root == root)?;
        Some(d.remember(parent, name, fd))
    })
}

/// Forgets `rel` and everything below it (it was removed or renamed).
fn evict(root: &Path, rel: &RelPath) {
    CACHE.with(|c| {
        if let Some(d) = c.borrow_mut().as_mut().filter(|d| d.root == root) {
            d.evict(rel);
        }
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn open_in_scope() -> usize {
        CACHE.with(|c| c.borrow().as_ref().map_or(0, |d| d.open))
    }

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
                Some((1_000_000, 5)),
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

    /// Searching a walk's component ends from the last one finds what a binary search
    /// over all of them finds, for every shared length.
    #[test]
    fn ends_upto_counts_like_a_binary_search() {
        for n in 0..40usize {
            let ends: Vec<usize> = (0..n).map(|i| 2 * i + 1).collect();
            for common in 0..2 * n + 3 {
                let want = ends.partition_point(|&e| e <= common);
                assert_eq!(super::ends_upto(&ends, common), want, "{n} {common}");
            }
        }
    }
}
