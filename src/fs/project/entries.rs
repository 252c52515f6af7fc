//! What is at a path in the project, and every read and write of it.
//!
//! Each helper takes a [`ProjectPath`] (or, for the reads, a root and a [`RelPath`]) and
//! reaches the parent directory through `parent_of`: one `openat(O_NOFOLLOW | O_DIRECTORY)`
//! per component from the project root (or from the deepest directory already opened in
//! this phase's `DirScope`), then acts on the last component relative to that descriptor
//! with `fs::at`'s `*at` calls, which never follow a symlink there either. The invariant kept: a write
//! lands inside the directory the walk reached, never through a symlink, so a parent swapped
//! for a symlink after the check makes the call fail with [`Error::Containment`] instead of
//! writing elsewhere. Files are created with `O_EXCL` and renamed without replacing, so
//! nothing already there is overwritten in place.

use std::ffi::{CStr, CString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use super::{
    cstring, evict, fstatat, is_missing, is_symlink_error, open_root, openat_dir, os_err, refuse,
    remember, walk_start, Comps, ProjectPath,
};
use crate::error::{Error, Result};
use crate::fs::at;
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;

/// File contents, shared between the apply planner's views of a file and the write phase: a
/// large file is held once, not once per view.
pub(crate) type Data = Arc<Vec<u8>>;

// ---- metadata ----

/// Identity and change stamp of a directory entry, to detect changes between the check
/// and the write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub size: i64,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
}

#[allow(clippy::unnecessary_cast)]
fn stamp_of(st: &at::Stat) -> Stamp {
    Stamp {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        mode: st.st_mode as u32,
        size: st.st_size as i64,
        mtime: Timestamp::mtime_of_stat(st),
        ctime: Timestamp::ctime_of_stat(st),
    }
}

/// What is at a path, read without following a symlink at any component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    Absent,
    File { data: Data, perm: u32, stamp: Stamp },
    Symlink { target: Vec<u8>, stamp: Stamp },
    Dir { stamp: Stamp },
    Other { stamp: Stamp },
}

impl Entry {
    pub(crate) fn stamp(&self) -> Option<Stamp> {
        match self {
            Entry::Absent => None,
            Entry::File { stamp, .. }
            | Entry::Symlink { stamp, .. }
            | Entry::Dir { stamp }
            | Entry::Other { stamp } => Some(*stamp),
        }
    }
}

/// Where one step of a walk down a path ended.
enum Step {
    /// In the directory, now the walk's (and remembered in the scope).
    Down,
    /// At a symlink, not followed.
    Symlink,
    /// At nothing (or at a file where a directory was needed).
    Missing,
}

/// Opens the directory `name` (component `comp`) in `dir` without following a symlink and
/// makes it the walk's `dir`, remembered in the scope as a child of `node`. With
/// `O_DIRECTORY | O_NOFOLLOW` a symlink gives `ELOOP` or `ENOTDIR` depending on the system:
/// then what is there is looked at.
fn step_down(
    root: &Path,
    dir: &mut Rc<OwnedFd>,
    node: &mut Option<usize>,
    comp: &[u8],
    name: &CStr,
) -> io::Result<Step> {
    match openat_dir(dir.as_fd(), name) {
        Ok(d) => {
            let d = Rc::new(d);
            *node = remember(root, *node, comp, &d);
            *dir = d;
            Ok(Step::Down)
        }
        Err(e) if is_symlink_error(&e, dir.as_fd(), name) => Ok(Step::Symlink),
        Err(e) if is_missing(&e) => Ok(Step::Missing),
        Err(e) => Err(e),
    }
}

/// The opened parent directory of a path and the last component's name, or `None` if a
/// parent directory does not exist.
fn parent_of(root: &Path, rel: &RelPath) -> Result<Option<(Rc<OwnedFd>, CString)>> {
    let c = Comps::of(rel);
    if rel.as_bytes().is_empty() {
        return Err(refuse(root, rel, "path is empty"));
    }
    let limit = c.parent_end();
    // Start below the deepest directory already open in this scope.
    let (k, off, mut dir, mut node) = walk_start(root, &c, limit)?;
    for (_, comp, end) in c.from(k, off, limit) {
        let name =
            cstring(comp).map_err(|e| Error::io("open directory", c.full_to(root, end), e))?;
        match step_down(root, &mut dir, &mut node, comp, &name) {
            Ok(Step::Down) => {}
            Ok(Step::Symlink) => return Err(refuse(root, rel, "path goes through a symlink")),
            Ok(Step::Missing) => return Ok(None),
            Err(e) => return Err(Error::io("open directory", c.full_to(root, end), e)),
        }
    }
    let name = cstring(c.last()).map_err(|e| Error::io("open", root.join(rel.as_path()), e))?;
    Ok(Some((dir, name)))
}

/// How the parent directories of `rel` stand in the project, found in one walk that never
/// follows a symlink: how many of them, from the top, are directories, and the file type
/// (`st_mode`) of the next one when something other than a directory is there (`None`
/// when nothing is, or when every parent is a directory). Below that entry nothing exists.
pub(crate) fn probe_parents(root: &Path, rel: &RelPath) -> Result<(usize, Option<libc::mode_t>)> {
    let c = Comps::of(rel);
    let limit = c.parent_end();
    let (k, off, mut dir, mut node) = walk_start(root, &c, limit)?;
    // Every parent is a directory when the walk gets through them all.
    let mut n = k;
    for (i, comp, end) in c.from(k, off, limit) {
        n = i + 1;
        let name = cstring(comp).map_err(|e| Error::io("inspect", c.full_to(root, end), e))?;
        let st = match fstatat(dir.as_fd(), &name) {
            Ok(st) => st,
            Err(e) if is_missing(&e) => return Ok((i, None)),
            Err(e) => return Err(Error::io("inspect", c.full_to(root, end), e)),
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Ok((i, Some(st.st_mode)));
        }
        match step_down(root, &mut dir, &mut node, comp, &name) {
            Ok(Step::Down) => {}
            // Swapped for a symlink since the stat.
            Ok(Step::Symlink) => return Ok((i, Some(libc::S_IFLNK))),
            Ok(Step::Missing) => return Ok((i, None)),
            Err(e) => return Err(Error::io("open directory", c.full_to(root, end), e)),
        }
    }
    Ok((n, None))
}

fn need_parent(p: &ProjectPath, op: &'static str) -> Result<(Rc<OwnedFd>, CString)> {
    parent_of(&p.root, &p.rel)?.ok_or_else(|| {
        Error::io(
            op,
            p.to_path_buf(),
            io::Error::new(io::ErrorKind::NotFound, "parent directory does not exist"),
        )
    })
}

// ---- reads ----

/// The stamp of the entry at `p`, `None` if absent.
pub(crate) fn stamp(p: &ProjectPath) -> Result<Option<Stamp>> {
    let Some((dir, name)) = parent_of(&p.root, &p.rel)? else {
        return Ok(None);
    };
    match fstatat(dir.as_fd(), &name) {
        Ok(st) => Ok(Some(stamp_of(&st))),
        Err(e) if is_missing(&e) => Ok(None),
        Err(e) => Err(Error::io("inspect", p.to_path_buf(), e)),
    }
}

/// Reads the entry at `p` in the project.
pub(crate) fn read(p: &ProjectPath) -> Result<Entry> {
    read_in(&p.root, &p.rel)
}

/// Reads the entry at `rel` below `root` (the project, or a pre-image tree), never
/// following a symlink.
pub(crate) fn read_in(root: &Path, rel: &RelPath) -> Result<Entry> {
    let full = root.join(rel.as_path());
    let Some((dir, name)) = parent_of(root, rel)? else {
        return Ok(Entry::Absent);
    };
    let st = match fstatat(dir.as_fd(), &name) {
        Ok(st) => st,
        Err(e) if is_missing(&e) => return Ok(Entry::Absent),
        Err(e) => return Err(Error::io("inspect", &full, e)),
    };
    let stamp = stamp_of(&st);
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {
            let fd = at::open_read(dir.as_fd(), &name)
                .map_err(|e| Error::io("open", &full, os_err(e)))?;
            let mut f = std::fs::File::from(fd);
            let mut data = Vec::new();
            f.read_to_end(&mut data)
                .map_err(|e| Error::io("read", &full, e))?;
            Ok(Entry::File {
                data: std::sync::Arc::new(data),
                perm: stamp.mode & 0o7777,
                stamp,
            })
        }
        libc::S_IFLNK => {
            let target = at::readlink(dir.as_fd(), &name)
                .map_err(|e| Error::io("read link", &full, os_err(e)))?;
            Ok(Entry::Symlink { target, stamp })
        }
        libc::S_IFDIR => Ok(Entry::Dir { stamp }),
        _ => Ok(Entry::Other { stamp }),
    }
}

/// Every non-directory entry below the directory `p` (recursively), as project paths.
pub(crate) fn list_leaves(p: &ProjectPath) -> Result<Vec<RelPath>> {
    let mut out = Vec::new();
    let Some((dir, name)) = parent_of(&p.root, &p.rel)? else {
        return Ok(out);
    };
    let fd = openat_dir(dir.as_fd(), &name)
        .map_err(|e| Error::io("open directory", p.to_path_buf(), e))?;
    walk_leaves(fd, p.rel.clone(), &p.root, &mut out, 0)?;
    Ok(out)
}

fn walk_leaves(
    fd: OwnedFd,
    rel: RelPath,
    root: &Path,
    out: &mut Vec<RelPath>,
    depth: usize,
) -> Result<()> {
    let full = root.join(rel.as_path());
    if depth > 256 {
        return Err(Error::io(
            "list directory",
            &full,
            io::Error::new(io::ErrorKind::InvalidData, "directory tree too deep"),
        ));
    }
    let dupfd = fd
        .try_clone()
        .map_err(|e| Error::io("list directory", &full, e))?;
    let names = at::names(dupfd).map_err(|e| Error::io("list directory", &full, os_err(e)))?;
    for n in names {
        let child = rel.join(&RelPath::from_bytes(n.to_bytes()).map_err(|_| {
            Error::io(
                "list directory",
                &full,
                io::Error::from(io::ErrorKind::InvalidData),
            )
        })?);
        let st = match fstatat(fd.as_fd(), &n) {
            Ok(st) => st,
            Err(e) if is_missing(&e) => continue,
            Err(e) => return Err(Error::io("inspect", root.join(child.as_path()), e)),
        };
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            let sub = openat_dir(fd.as_fd(), &n)
                .map_err(|e| Error::io("open directory", root.join(child.as_path()), e))?;
            walk_leaves(sub, child, root, out, depth + 1)?;
        } else {
            out.push(child);
        }
    }
    Ok(())
}

// ---- writes (all take a ProjectPath) ----

/// Whether a new file's writeback starts as soon as it is written.
///
/// Every file made here is staged content or a journal file that the write phase's next
/// `syncfs` must bring to disk. [`Writeback::Start`] starts its writeback at once
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, the batch flush `git` does with
/// `core.fsyncMethod=batch`), so that sync finds it under way: a lone apply of 100 files on
/// a journaled ext4 image returned 6 ms sooner (median of 20). [`Writeback::Leave`] leaves
/// it to the sync, for writers that stage while others use every core (`commit_all`'s
/// members): there the call queues the blocks on the writing thread's time, and a
/// `commit_all` of 4 × 100 files returned 9 ms later with it (medians of 35).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writeback {
    /// Start the writeback now.
    Start,
    /// Leave it to the next sync.
    Leave,
}

/// Creates a new regular file (never replacing anything) with `data` and `perm`,
/// optionally setting its mtime (not synced: see [`sync_fs`]).
pub(crate) fn create_file(
    p: &ProjectPath,
    data: &[u8],
    perm: u32,
    mtime: Option<Timestamp>,
) -> Result<()> {
    create_file_with(p, data, perm, mtime, Writeback::Start)
}

fn create_file_with(
    p: &ProjectPath,
    data: &[u8],
    perm: u32,
    mtime: Option<Timestamp>,
    wb: Writeback,
) -> Result<()> {
    let full = p.to_path_buf();
    let (dir, name) = need_parent(p, "create")?;
    let fd = at::create_new(dir.as_fd(), &name, 0o600)
        .map_err(|e| Error::io("create", &full, os_err(e)))?;
    let mut f = std::fs::File::from(fd);
    fill(&mut f, &full, data, perm, mtime, wb)?;
    // Not synced one by one: the commit syncs the filesystem once after staging
    // (`sync_fs`), which costs one journal commit instead of one per file.
    Ok(())
}

/// [`create_file`] at `p` (a staging name), with the new inode allocated in the directory
/// that will hold it once placed (`beside`'s parent), as `git apply` allocates it.
///
/// Why: a filesystem places a file's inode near its directory; a staging directory made
/// for one apply is new, and ext4 puts a new directory in a group with many free inodes —
/// right after a large deletion, the group that deletion emptied, where an ext4 without a
/// journal scans past every recently freed inode on each allocation (`recently_deleted`;
/// measured: 100 staged files cost ~100 ms more than `git apply`'s 100 new files). The file
/// is made with `O_TMPFILE` in `beside`'s directory (nameless: a crash leaves nothing
/// there), filled, and then linked to `p` (`linkat`, which never replaces). Where that
/// cannot be done (no such directory yet, a filesystem without `O_TMPFILE`, a kernel that
/// refuses the link), it is [`create_file`].
pub(crate) fn create_file_beside(
    p: &ProjectPath,
    beside: &ProjectPath,
    data: &[u8],
    perm: u32,
    mtime: Option<Timestamp>,
    wb: Writeback,
) -> Result<()> {
    // Not there yet (the apply creates it), or not a plain directory now (the apply may
    // replace a symlink there): staged where it is named.
    let Ok(Some((near, _))) = parent_of(&beside.root, &beside.rel) else {
        return create_file_with(p, data, perm, mtime, wb);
    };
    let tmp = match at::tmpfile(near.as_fd()) {
        Ok(fd) => fd,
        Err(_) => return create_file_with(p, data, perm, mtime, wb),
    };
    let full = p.to_path_buf();
    let mut f = std::fs::File::from(tmp);
    fill(&mut f, &full, data, perm, mtime, wb)?;
    let (dir, name) = need_parent(p, "create")?;
    let linked = at::link_tmpfile(f.as_fd(), dir.as_fd(), &name);
    match linked {
        Ok(()) => Ok(()),
        Err(e @ at::Errno::EXIST) => Err(Error::io("create", &full, os_err(e))),
        // The nameless file goes with its descriptor.
        Err(_) => create_file_with(p, data, perm, mtime, wb),
    }
}

/// Writes a new file's content, mode and mtime through its descriptor.
fn fill(
    f: &mut std::fs::File,
    full: &Path,
    data: &[u8],
    perm: u32,
    mtime: Option<Timestamp>,
    wb: Writeback,
) -> Result<()> {
    f.write_all(data).map_err(|e| Error::io("write", full, e))?;
    // Only a hint: an error is of no consequence, the sync still covers the file.
    if !data.is_empty() && wb == Writeback::Start {
        at::start_writeback(f.as_fd());
    }
    at::chmod(f.as_fd(), perm).map_err(|e| Error::io("set mode", full, os_err(e)))?;
    if let Some(t) = mtime {
        at::set_fd_mtime(f.as_fd(), t).map_err(|e| Error::io("set mtime", full, os_err(e)))?;
    }
    Ok(())
}

/// Flushes the project's filesystem (`syncfs`): staged contents reach the disk before
/// any of them replaces an original, so a crash leaves old or new files, never torn ones.
/// Also used for the filesystem of an undo record kept elsewhere (`root` is then its
/// directory).
pub(crate) fn sync_fs(root: &Path) -> Result<()> {
    let fd = open_root(root).map_err(|e| Error::io("open directory", root, e))?;
    at::syncfs(fd.as_fd()).map_err(|e| Error::io("sync", root, os_err(e)))
}

/// Creates a symlink at `p` pointing to `target`.
pub(crate) fn create_symlink(p: &ProjectPath, target: &[u8]) -> Result<()> {
    let full = p.to_path_buf();
    let (dir, name) = need_parent(p, "create symlink")?;
    let t = cstring(target).map_err(|e| Error::io("create symlink", &full, e))?;
    at::symlink(&t, dir.as_fd(), &name).map_err(|e| Error::io("create symlink", &full, os_err(e)))
}

/// `renameat2(from, to, flags)` through the parents' descriptors (after dropping both paths
/// from the walk cache). `Ok(false)` where the kernel or the filesystem lacks the flag
/// (`EINVAL`, `ENOSYS`, `EOPNOTSUPP`): nothing was changed, the caller falls back.
/// `what` names the operation in errors.
fn rename_flags(
    from: &ProjectPath,
    to: &ProjectPath,
    what: &'static str,
    how: at::RenameFlags,
) -> Result<bool> {
    let (fd1, n1) = need_parent(from, what)?;
    let (fd2, n2) = need_parent(to, what)?;
    evict(&from.root, &from.rel);
    evict(&to.root, &to.rel);
    match at::rename2(fd1.as_fd(), &n1, fd2.as_fd(), &n2, how) {
        Ok(()) => Ok(true),
        Err(at::Errno::INVAL | at::Errno::NOSYS | at::Errno::OPNOTSUPP) => Ok(false),
        Err(e) => Err(Error::io(what, to.to_path_buf(), os_err(e))),
    }
}

/// Renames `from` to `to`, failing if `to` exists. Symlinks are moved, not followed.
pub(crate) fn rename_noreplace(from: &ProjectPath, to: &ProjectPath) -> Result<()> {
    if rename_flags(from, to, "rename", at::RenameFlags::NOREPLACE)? {
        return Ok(());
    }
    // Fallback: check, then rename (a small window, but never through a symlink).
    let (fd1, n1) = need_parent(from, "rename")?;
    let (fd2, n2) = need_parent(to, "rename")?;
    evict(&from.root, &from.rel);
    evict(&to.root, &to.rel);
    let err = |e| Error::io("rename", to.to_path_buf(), e);
    match fstatat(fd2.as_fd(), &n2) {
        Ok(_) => return Err(err(io::Error::from_raw_os_error(libc::EEXIST))),
        Err(e) if is_missing(&e) => {}
        Err(e) => return Err(err(e)),
    }
    at::rename(fd1.as_fd(), &n1, fd2.as_fd(), &n2).map_err(|e| err(os_err(e)))
}

/// Swaps the entries at `a` and `b` atomically (`RENAME_EXCHANGE`): one rename where moving
/// `b` aside and putting `a` in its place would take two. Both must exist. `Ok(false)` where
/// the filesystem or the C library cannot exchange (nothing was changed then): the caller
/// renames in two steps.
pub(crate) fn exchange(a: &ProjectPath, b: &ProjectPath) -> Result<bool> {
    rename_flags(a, b, "exchange", at::RenameFlags::EXCHANGE)
}

/// Removes the file or symlink at `p`.
pub(crate) fn remove_file(p: &ProjectPath) -> Result<()> {
    let (dir, name) = need_parent(p, "remove")?;
    at::unlink(dir.as_fd(), &name).map_err(|e| Error::io("remove", p.to_path_buf(), os_err(e)))
}

/// Creates the directory `p`, with `perm` if given (else 0777 minus the umask).
pub(crate) fn make_dir(p: &ProjectPath, perm: Option<u32>) -> Result<()> {
    let full = p.to_path_buf();
    let (dir, name) = need_parent(p, "create directory")?;
    at::mkdir(dir.as_fd(), &name, 0o777)
        .map_err(|e| Error::io("create directory", &full, os_err(e)))?;
    if let Some(perm) = perm {
        let d =
            openat_dir(dir.as_fd(), &name).map_err(|e| Error::io("open directory", &full, e))?;
        at::chmod(d.as_fd(), perm).map_err(|e| Error::io("set mode", &full, os_err(e)))?;
    }
    Ok(())
}

/// Creates the directories of `p` that are missing, shallowest first, in one walk down it:
/// from the deepest directory already open in this scope, each component is opened
/// (`O_NOFOLLOW | O_DIRECTORY`) from the descriptor before it, and once one is missing it
/// and every one below it are made with `mkdirat` and opened from the one made before. Each
/// component is looked at once, so the whole path costs time proportional to its length,
/// whatever its depth (one call of [`make_dir`] per missing ancestor would walk and check
/// the path each time).
///
/// `perm(k)` gives the mode of the directory made of the first `k` components when it is
/// created (`None`: 0777 minus the umask); `created(k)` is told of each creation right
/// after it (an error from it stops the walk: what was created before stays). The
/// containment guarantees are [`make_dir`]'s: a symlink at any component is refused with
/// [`Error::Containment`], never followed, and `p` passed the check (no `.git` alias in
/// it). Something other than a directory at a component fails with
/// [`Error::ApplyFailed`].
pub(crate) fn make_dirs(
    p: &ProjectPath,
    perm: &mut dyn FnMut(usize) -> Option<u32>,
    created: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<()> {
    let (root, rel) = (&p.root, &p.rel);
    let c = Comps::of(rel);
    let limit = c.whole_end();
    let (k, off, mut dir, mut node) = walk_start(root, &c, limit)?;
    // Once a directory is created, nothing is below it: no lookup first.
    let mut making = false;
    for (i, comp, end) in c.from(k, off, limit) {
        let name =
            cstring(comp).map_err(|e| Error::io("create directory", c.full_to(root, end), e))?;
        if !making {
            match openat_dir(dir.as_fd(), &name) {
                Ok(d) => {
                    let d = Rc::new(d);
                    node = remember(root, node, comp, &d);
                    dir = d;
                    continue;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => making = true,
                Err(e) if is_symlink_error(&e, dir.as_fd(), &name) => {
                    return Err(refuse(root, rel, "path goes through a symlink"))
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                    return Err(Error::ApplyFailed(format!(
                        "{} is not a directory",
                        String::from_utf8_lossy(c.upto(end))
                    )))
                }
                Err(e) => return Err(Error::io("open directory", c.full_to(root, end), e)),
            }
        }
        at::mkdir(dir.as_fd(), &name, 0o777)
            .map_err(|e| Error::io("create directory", c.full_to(root, end), os_err(e)))?;
        // Opened without following: a symlink swapped in since the mkdirat is refused.
        let d = match openat_dir(dir.as_fd(), &name) {
            Ok(d) => Rc::new(d),
            Err(e) if is_symlink_error(&e, dir.as_fd(), &name) => {
                return Err(refuse(root, rel, "path goes through a symlink"))
            }
            Err(e) => return Err(Error::io("open directory", c.full_to(root, end), e)),
        };
        if let Some(perm) = perm(i + 1) {
            at::chmod(d.as_fd(), perm)
                .map_err(|e| Error::io("set mode", c.full_to(root, end), os_err(e)))?;
        }
        node = remember(root, node, comp, &d);
        dir = d;
        created(i + 1)?;
    }
    Ok(())
}

/// Removes the directory `p` if it is empty; `Ok(false)` if it is not.
pub(crate) fn remove_dir_if_empty(p: &ProjectPath) -> Result<bool> {
    let (dir, name) = need_parent(p, "remove directory")?;
    match at::rmdir(dir.as_fd(), &name) {
        Ok(()) => {
            evict(&p.root, &p.rel);
            Ok(true)
        }
        Err(at::Errno::NOTEMPTY | at::Errno::EXIST) => Ok(false),
        Err(e) => Err(Error::io("remove directory", p.to_path_buf(), os_err(e))),
    }
}

/// Sets the mtime of the entry at `p` (not following a symlink).
pub(crate) fn set_mtime(p: &ProjectPath, t: Timestamp) -> Result<()> {
    let (dir, name) = need_parent(p, "set mtime")?;
    at::set_mtime(dir.as_fd(), &name, t)
        .map_err(|e| Error::io("set mtime", p.to_path_buf(), os_err(e)))
}

/// Syncs the project root directory.
pub(crate) fn sync_root(root: &Path) -> Result<()> {
    let fd = open_root(root).map_err(|e| Error::io("open directory", root, e))?;
    at::fsync(fd.as_fd()).map_err(|e| Error::io("sync", root, os_err(e)))
}

/// Hard-links the regular file at `p` to `dest` (outside the project: an undo record),
/// so the record keeps the original without copying it. Returns the file's stamp after
/// linking (its ctime changed) and its link count, or `None` where the filesystem cannot
/// link there (another filesystem, no hard links): the caller copies instead.
pub(crate) fn link_out(p: &ProjectPath, dest: &Path) -> Result<Option<(Stamp, u64)>> {
    let (dir, name) = need_parent(p, "link")?;
    // A file with other links is left alone (its ctime too): the caller copies it.
    let st = fstatat(dir.as_fd(), &name).map_err(|e| Error::io("inspect", p.to_path_buf(), e))?;
    if st.st_nlink != 1 {
        return Ok(None);
    }
    // Flags 0: a symlink at `name` is linked itself, never followed.
    if let Err(e) = at::link_out(dir.as_fd(), &name, dest) {
        return match e {
            at::Errno::XDEV
            | at::Errno::PERM
            | at::Errno::MLINK
            | at::Errno::NOTSUP
            | at::Errno::NOSYS => Ok(None),
            _ => Err(Error::io("link", dest, os_err(e))),
        };
    }
    let st = fstatat(dir.as_fd(), &name).map_err(|e| Error::io("inspect", p.to_path_buf(), e))?;
    #[allow(clippy::unnecessary_cast)]
    Ok(Some((stamp_of(&st), st.st_nlink as u64)))
}

/// The project root's stamp.
pub(crate) fn root_stamp(root: &Path) -> Result<Stamp> {
    let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
    let st = at::fstat(fd.as_fd()).map_err(|e| Error::io("inspect", root, os_err(e)))?;
    Ok(stamp_of(&st))
}

/// Restores the project root's mtime (after a rollback).
pub(crate) fn set_root_mtime(root: &Path, t: Timestamp) -> Result<()> {
    let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
    at::set_fd_mtime(fd.as_fd(), t).map_err(|e| Error::io("set mtime", root, os_err(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::project::path_in_project;

    /// A parent directory swapped for a symlink after the check: every write helper walks
    /// the path again with `O_NOFOLLOW` and refuses.
    #[test]
    fn swapped_parent_is_refused_at_write_time() {
        let project = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = project.path();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/old"), b"old").unwrap();
        let x = path_in_project(root, &RelPath::new("d/x").unwrap()).unwrap();
        let old = path_in_project(root, &RelPath::new("d/old").unwrap()).unwrap();
        let top = path_in_project(root, &RelPath::new("top").unwrap()).unwrap();
        std::fs::rename(root.join("d"), root.join("d.real")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("d")).unwrap();
        std::fs::write(outside.path().join("old"), b"outside").unwrap();

        let is_containment = |r: Result<()>| matches!(r, Err(Error::Containment { .. }));
        assert!(is_containment(create_file(&x, b"pwned", 0o644, None)));
        assert!(is_containment(create_symlink(&x, b"/etc")));
        assert!(is_containment(make_dir(&x, None)));
        assert!(is_containment(remove_file(&old)));
        assert!(is_containment(set_mtime(
            &old,
            crate::fs::Timestamp::new(0, 0)
        )));
        assert!(is_containment(rename_noreplace(&old, &top)));
        std::fs::write(root.join("top"), b"top").unwrap();
        assert!(is_containment(rename_noreplace(&top, &x)));
        assert!(matches!(read(&old), Err(Error::Containment { .. })));
        let names: Vec<_> = std::fs::read_dir(outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("old")]);
        assert_eq!(
            std::fs::read(outside.path().join("old")).unwrap(),
            b"outside"
        );
        // The chokepoint itself now refuses the path too.
        assert!(path_in_project(root, &RelPath::new("d/x").unwrap()).is_err());
    }
}
