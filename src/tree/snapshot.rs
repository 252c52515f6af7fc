//! Copying a file set into a session directory: the base snapshot and each sandbox.
//!
//! Which files to copy is decided by [`crate::tree::select`]; this module only copies, in parallel
//! on all cores, keeping symlinks as symlinks (never followed), exec bits and mtimes. Regular
//! files are reflinked where the filesystem can share blocks, else copied in the kernel
//! (`copy_file_range`). For every copied node it records the copy's own stat data, the
//! [`StatKey`], so finalizing later stats the sandbox instead of reading every file.

use std::borrow::Borrow;
use std::fs::{self, File, FileTimes, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::fs::state_dir::{self, DirHandle, StatePath};
use crate::fs::Timestamp;

/// The type of a node in a tree: what git can store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A regular file.
    File {
        /// Owner-executable bit set (git mode 100755).
        executable: bool,
    },
    /// A symbolic link; its target is its content.
    Symlink,
}

impl NodeKind {
    /// git's mode for this kind: 100644, 100755 or 120000.
    pub fn git_mode(self) -> u32 {
        match self {
            NodeKind::File { executable: false } => 0o100644,
            NodeKind::File { executable: true } => 0o100755,
            NodeKind::Symlink => 0o120000,
        }
    }

    /// The kind of a node from its (lstat) metadata, `None` for directories and special files.
    pub fn from_metadata(m: &fs::Metadata) -> Option<NodeKind> {
        let ft = m.file_type();
        if ft.is_symlink() {
            Some(NodeKind::Symlink)
        } else if ft.is_file() {
            Some(NodeKind::File {
                executable: m.mode() & 0o100 != 0,
            })
        } else {
            None
        }
    }
}

/// One file or symlink of a tree, by its path relative to the tree's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Path relative to the tree root.
    pub rel: RelPath,
    /// File or symlink.
    pub kind: NodeKind,
}

/// The stat data that tells whether a file changed since it was recorded.
///
/// `ctime` cannot be set by user programs, so any write, chmod or replacement of the file
/// after the recording changes at least one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatKey {
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    pub mtime: Timestamp,
    /// Status change time (seconds, nanoseconds).
    pub ctime: Timestamp,
    /// Full `st_mode`.
    pub mode: u32,
}

impl StatKey {
    /// Reads the key from a raw `stat`.
    pub(crate) fn from_stat(st: &rustix::fs::Stat) -> StatKey {
        StatKey {
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime: Timestamp::mtime_of_stat(st),
            ctime: Timestamp::ctime_of_stat(st),
            mode: st.st_mode,
        }
    }

    /// Reads the key from lstat metadata.
    pub fn from_metadata(m: &fs::Metadata) -> StatKey {
        StatKey {
            ino: m.ino(),
            size: m.size(),
            mtime: Timestamp::mtime_of(m),
            ctime: Timestamp::ctime_of(m),
            mode: m.mode(),
        }
    }
}

/// Progress of a copy, reported to the caller's callback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Nodes copied so far.
    pub files_done: u64,
    /// Nodes to copy in all.
    pub files_total: u64,
    /// Bytes copied so far.
    pub bytes_done: u64,
}

/// A progress callback; called from worker threads, so it must be `Sync`.
pub type ProgressFn = dyn Fn(Progress) + Send + Sync;

/// What a copy did.
#[derive(Debug, Default)]
pub struct CopyOutcome {
    /// For each input node, in order: the copy's stat key, or `None` when it was not copied
    /// (vanished, changed type, or failed verification).
    pub keys: Vec<Option<StatKey>>,
    /// Nodes that were skipped because the source vanished or changed type, with the reason.
    pub skipped: Vec<(RelPath, String)>,
    /// Bytes copied.
    pub bytes: u64,
}

/// Decides, from the source's `fstat` at open time, whether node `i` may be copied from it.
pub type VerifyFn<'a> = dyn Fn(usize, &fs::Metadata) -> bool + Sync + 'a;

enum Copied {
    Done(StatKey, u64),
    /// The source is no longer of the expected kind.
    WrongKind,
    /// `verify` refused the source, or it changed while being copied; nothing was left.
    Unverified,
}

/// Copies `nodes` (relative to `src_root`) into `dst_root`, creating parent directories.
///
/// All cores copy. A source that vanished or is no longer a file/symlink is skipped and
/// reported, not fatal: the user may edit the project while it is being snapshotted. With
/// `verify`, a regular file is copied only when `verify` accepts its stat data at open time
/// and that stat data is unchanged after the copy; refused nodes get no key.
pub fn copy_tree<N: Borrow<Node> + Sync>(
    src_root: &Path,
    nodes: &[N],
    dst_root: &StatePath,
    progress: Option<&ProgressFn>,
    verify: Option<&VerifyFn<'_>>,
) -> Result<CopyOutcome> {
    fill_tree(src_root, nodes, dst_root, progress, verify, false)
}

/// [`copy_tree`] by hard links: each node of `src_root` becomes a second name of the same
/// inode in `dst_root` (directories are made), and only a node that cannot be linked there
/// (another filesystem, the link limit) is copied. For a tree that is never written in
/// place, from one that is never written in place either — a session's `base/` into its
/// `.lower/`: no inode and no data is made per file, where on a filesystem whose inode
/// allocation is slow (ext4 soon after many deletions) each new inode cost up to a third of
/// a millisecond. Never for a tree tools write (a sandbox): a write would reach both.
pub fn link_tree<N: Borrow<Node> + Sync>(
    src_root: &Path,
    nodes: &[N],
    dst_root: &StatePath,
) -> Result<CopyOutcome> {
    fill_tree(src_root, nodes, dst_root, None, None, true)
}

/// [`copy_tree`], or [`link_tree`] when `link`.
fn fill_tree<N: Borrow<Node> + Sync>(
    src_root: &Path,
    nodes: &[N],
    dst_root: &StatePath,
    progress: Option<&ProgressFn>,
    verify: Option<&VerifyFn<'_>>,
    link: bool,
) -> Result<CopyOutcome> {
    // The directory being filled, opened once beneath its session directory: every
    // directory and file of the copy is made relative to descriptors reached from it, never
    // by a path the kernel resolves again.
    let root = state_dir::open_dir(dst_root)?;
    let mut parents: Vec<RelPath> = Vec::new();
    for n in nodes {
        let n: &Node = n.borrow();
        let Some(parent) = n.rel.parent() else {
            continue;
        };
        if parents.last() == Some(&parent) {
            continue;
        }
        parents.push(parent);
    }
    root.create_dirs(&parents)?;
    drop(parents);

    let total = nodes.len() as u64;
    let next = AtomicUsize::new(0);
    let done = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let reflink_ok = AtomicBool::new(true);
    let keys: Vec<Mutex<Option<StatKey>>> = (0..nodes.len()).map(|_| Mutex::new(None)).collect();
    let skipped = Mutex::new(Vec::new());
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    // Creating files waits on the filesystem journal and the disk as much as it uses a CPU;
    // one thread alone for nothing to copy (a later session's copies are often none).
    let threads = crate::cores::io_threads(nodes.len(), 1, 16);
    // Runs of 64 nodes, or fewer when there are too few for every thread to get some
    // (the few dozen symlinks of a later session are spread too).
    let chunk = (nodes.len() / threads.max(1)).clamp(1, 64);

    // This thread copies too; a thread that cannot be made leaves the others more runs.
    crate::cores::workers(threads, || {
        // The parent directory of the last node this thread copied, and its
        // descriptor: nodes come in path order, so one `openat2` serves a directory's
        // files, and each file is one `openat` of its own name.
        let mut parent: Option<(std::path::PathBuf, DirHandle)> = None;
        loop {
            if failure.lock().is_some() {
                return;
            }
            let start = next.fetch_add(chunk, Ordering::Relaxed);
            if start >= nodes.len() {
                return;
            }
            let end = (start + chunk).min(nodes.len());
            for (i, n) in nodes.iter().enumerate().take(end).skip(start) {
                let n: &Node = n.borrow();
                let check = verify.map(|v| move |m: &fs::Metadata| v(i, m));
                let r = in_parent(&root, &mut parent, &n.rel).and_then(|(dir, name)| {
                    let src = src_root.join(n.rel.as_path());
                    if link {
                        if let Some(done) = link_node(&src, dir, name, n.kind)? {
                            return Ok(done);
                        }
                    }
                    copy_node(
                        &src,
                        dir,
                        name,
                        n.kind,
                        &reflink_ok,
                        check.as_ref().map(|c| c as &dyn Fn(&fs::Metadata) -> bool),
                    )
                });
                match r {
                    Ok(Copied::Done(key, len)) => {
                        *keys[i].lock() = Some(key);
                        bytes.fetch_add(len, Ordering::Relaxed);
                    }
                    Ok(Copied::Unverified) => {}
                    Ok(Copied::WrongKind) => skipped
                        .lock()
                        .push((n.rel.clone(), "changed type during snapshot".to_string())),
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        skipped
                            .lock()
                            .push((n.rel.clone(), "vanished during snapshot".to_string()))
                    }
                    Err(e) => {
                        *failure.lock() = Some(e);
                        return;
                    }
                }
            }
            let d = done.fetch_add((end - start) as u64, Ordering::Relaxed) + (end - start) as u64;
            if let Some(cb) = progress {
                cb(Progress {
                    files_done: d,
                    files_total: total,
                    bytes_done: bytes.load(Ordering::Relaxed),
                });
            }
        }
    });
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    Ok(CopyOutcome {
        keys: keys.into_iter().map(|k| k.into_inner()).collect(),
        skipped: skipped.into_inner(),
        bytes: bytes.into_inner(),
    })
}

/// Touches `marker` until the filesystem clock has moved past `newest` (the newest ctime of
/// the copies), and returns the marker's ctime. Waiting one clock tick (a few ms) means
/// nodes copied before it are not racy, so finalize can trust their stat data.
pub fn clock_stamp_after(marker: &StatePath, newest: Timestamp) -> Result<Timestamp> {
    let mut stamp = newest;
    for _ in 0..200 {
        state_dir::remove_file(marker)?;
        state_dir::write_scratch(marker, b"")?;
        let m = state_dir::symlink_metadata(marker)?;
        stamp = Timestamp::ctime_of(&m);
        if stamp > newest {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // If the clock never advanced (frozen clock, odd filesystem), every node stays racy:
    // slow but correct.
    state_dir::remove_file(marker)?;
    Ok(stamp)
}

/// The directory to make `rel` in (`root`, or its parent directory opened beneath `root`,
/// reusing `cached` when it is the same as the last node's) and the name to make there.
fn in_parent<'a>(
    root: &'a DirHandle,
    cached: &'a mut Option<(std::path::PathBuf, DirHandle)>,
    rel: &'a RelPath,
) -> Result<(&'a DirHandle, &'a std::ffi::OsStr)> {
    let p = rel.as_path();
    let name = p.file_name().unwrap_or(p.as_os_str());
    let Some(parent) = rel.parent() else {
        return Ok((root, name));
    };
    if cached.as_ref().is_none_or(|(k, _)| k != parent.as_path()) {
        let d = root.open_subdir(&parent)?;
        *cached = Some((parent.as_path().to_path_buf(), d));
    }
    match cached {
        Some((_, d)) => Ok((d, name)),
        None => Ok((root, name)),
    }
}

/// Links `src` into `dir` as `name` ([`link_tree`]); `None` when no link could be made
/// (the caller copies). A linked inode that is not of the node's kind is unlinked again.
fn link_node(
    src: &Path,
    dir: &DirHandle,
    name: &std::ffi::OsStr,
    kind: NodeKind,
) -> Result<Option<Copied>> {
    if !dir.link_from(src, name)? {
        return Ok(None);
    }
    let d = dir.lstat(name)?;
    let ft = rustix::fs::FileType::from_raw_mode(d.st_mode);
    let expected = match kind {
        NodeKind::Symlink => rustix::fs::FileType::Symlink,
        NodeKind::File { .. } => rustix::fs::FileType::RegularFile,
    };
    if ft != expected {
        dir.remove_file(name)?;
        return Ok(Some(Copied::WrongKind));
    }
    // Nothing was copied: no bytes to count.
    Ok(Some(Copied::Done(StatKey::from_stat(&d), 0)))
}

/// Copies one node into `dir` as `name`; `Ok(None)` when the source is no longer of the
/// expected kind.
fn copy_node(
    src: &Path,
    dir: &DirHandle,
    name: &std::ffi::OsStr,
    kind: NodeKind,
    reflink_ok: &AtomicBool,
    verify: Option<&dyn Fn(&fs::Metadata) -> bool>,
) -> Result<Copied> {
    match kind {
        NodeKind::Symlink => {
            let m = fs::symlink_metadata(src).ctx("stat", src)?;
            if !m.file_type().is_symlink() {
                return Ok(Copied::WrongKind);
            }
            let target = fs::read_link(src).ctx("read symlink", src)?;
            dir.create_symlink(&target, name)?;
            dir.set_mtime(name, Timestamp::mtime_of(&m))?;
            let d = dir.lstat(name)?;
            Ok(Copied::Done(StatKey::from_stat(&d), 0))
        }
        NodeKind::File { .. } => {
            let input = match OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(src)
            {
                Ok(f) => f,
                // ELOOP: it became a symlink since selection.
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Copied::WrongKind),
                Err(e) => return Err(Error::io("open for copy", src, e)),
            };
            let m = input.metadata().ctx("stat", src)?;
            if !m.is_file() {
                return Ok(Copied::WrongKind);
            }
            if verify.is_some_and(|v| !v(&m)) {
                return Ok(Copied::Unverified);
            }
            let mode = if m.mode() & 0o100 != 0 { 0o755 } else { 0o644 };
            let mtime = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let out = copy_contents(&input, m.len(), dir, name, mode, reflink_ok)?;
            if verify.is_some() {
                let after = input.metadata().ctx("stat", src)?;
                if StatKey::from_metadata(&after) != StatKey::from_metadata(&m) {
                    // Written while being copied: the copy may mix old and new content.
                    drop(out);
                    dir.remove_file(name)?;
                    return Ok(Copied::Unverified);
                }
            }
            out.set_times(FileTimes::new().set_modified(mtime))
                .map_err(|e| Error::io("set mtime", dir.path().join(name), e))?;
            let d = out
                .metadata()
                .map_err(|e| Error::io("stat copy", dir.path().join(name), e))?;
            Ok(Copied::Done(StatKey::from_metadata(&d), m.len()))
        }
    }
}

/// Copies `len` bytes of `input` into a new file at `dst`, with as few system calls as
/// possible (this runs once per file of the project): a clone of the extents (`FICLONE`,
/// copy-on-write on XFS, Btrfs…) while the filesystem supports it, else `copy_file_range`
/// (in-kernel), else plain reads and writes.
fn copy_contents(
    input: &File,
    len: u64,
    dir: &DirHandle,
    name: &std::ffi::OsStr,
    mode: u32,
    reflink_ok: &AtomicBool,
) -> Result<File> {
    use std::os::fd::AsRawFd;
    let out = dir.create_file_new(name, mode)?;
    let (ifd, ofd) = (input.as_raw_fd(), out.as_raw_fd());
    if len == 0 {
        return Ok(out);
    }
    if reflink_ok.load(Ordering::Relaxed) {
        // SAFETY: both descriptors are open for the duration of the call.
        if unsafe { libc::ioctl(ofd, libc::FICLONE, ifd) } == 0 {
            return Ok(out);
        }
        // Not supported here (or across filesystems): stop trying for this copy.
        reflink_ok.store(false, Ordering::Relaxed);
    }
    let mut done: u64 = 0;
    while done < len {
        let want = (len - done).min(1 << 30) as usize;
        // SAFETY: null offsets use and advance the descriptors' own file positions.
        let n = unsafe {
            libc::copy_file_range(
                ifd,
                std::ptr::null_mut(),
                ofd,
                std::ptr::null_mut(),
                want,
                0,
            )
        };
        if n > 0 {
            done += n as u64;
            continue;
        }
        if n == 0 {
            break; // the file shrank while being copied; the verify step sees it
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP | libc::EPERM) => {
                // Fall back to the generic path from the current offsets.
                let mut r = input;
                let mut w = &out;
                std::io::copy(&mut r, &mut w)
                    .map_err(|e| Error::io("copy", dir.path().join(name), e))?;
                return Ok(out);
            }
            _ => return Err(Error::io("copy", dir.path().join(name), e)),
        }
    }
    Ok(out)
}

/// Lists every file and symlink under `root` (never following symlinks, skipping `.git`
/// directories), sorted by path bytes. Used for sandboxes, whose content is entirely the
/// library's own copy plus what the delegation wrote.
///
/// This is the whole cost of an unchanged finalize (one `lstat` per node), so directories are
/// read by all cores from a shared queue.
pub fn list_tree(root: &Path) -> Result<Vec<(Node, StatKey)>> {
    Ok(list_tree_and_dirs(root)?.0)
}

/// [`list_tree`], and every directory it read below `root` with its inode number (from the
/// directory entry: no `stat`), `.git` directories left out as there; unsorted.
///
/// A listing kept up to date from a change record ([`crate::tree::listing`]) needs the
/// directories: one replaced by another at the same path is told by its inode number.
#[allow(clippy::type_complexity)]
pub fn list_tree_and_dirs(root: &Path) -> Result<(Vec<(Node, StatKey)>, Vec<(Vec<u8>, u64)>)> {
    struct Queue {
        dirs: Vec<Vec<u8>>,
        active: usize,
        failed: Option<Error>,
    }
    let queue = Mutex::new(Queue {
        dirs: vec![Vec::new()],
        active: 0,
        failed: None,
    });
    let cv = parking_lot::Condvar::new();
    let threads = crate::cores::count().min(8);
    // Each directory is listed by whichever worker takes it (this thread is one); a
    // listing that panics fails the whole listing rather than leave the others waiting.
    let parts = crate::cores::workers(threads, || {
        let mut out = Vec::new();
        let mut seen_dirs = Vec::new();
        loop {
            let rel_dir = {
                let mut q = queue.lock();
                loop {
                    if q.failed.is_some() {
                        return (out, seen_dirs);
                    }
                    if let Some(d) = q.dirs.pop() {
                        q.active += 1;
                        break d;
                    }
                    if q.active == 0 {
                        cv.notify_all();
                        return (out, seen_dirs);
                    }
                    cv.wait(&mut q);
                }
            };
            let mut found_dirs = Vec::new();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                list_dir(root, &rel_dir, &mut out, &mut found_dirs)
            }))
            .unwrap_or_else(|_| {
                Err(Error::io(
                    "list",
                    root.join(std::ffi::OsStr::from_bytes(&rel_dir)),
                    std::io::Error::other("listing the directory panicked"),
                ))
            });
            let mut q = queue.lock();
            q.active -= 1;
            match r {
                Ok(()) => q.dirs.extend(found_dirs.into_iter().map(|(d, ino)| {
                    seen_dirs.push((d.clone(), ino));
                    d
                })),
                Err(e) => {
                    q.failed.get_or_insert(e);
                }
            }
            cv.notify_all();
        }
    });
    if let Some(e) = queue.into_inner().failed {
        return Err(e);
    }
    let mut dirs = Vec::new();
    let mut out: Vec<(Node, StatKey)> = Vec::new();
    for (files, d) in parts {
        out.extend(files);
        dirs.extend(d);
    }
    out.sort_unstable_by(|a, b| a.0.rel.as_bytes().cmp(b.0.rel.as_bytes()));
    Ok((out, dirs))
}

/// Reads one directory of [`list_tree`]: nodes into `out`, subdirectories into `dirs`.
fn list_dir(
    root: &Path,
    rel_dir: &[u8],
    out: &mut Vec<(Node, StatKey)>,
    dirs: &mut Vec<(Vec<u8>, u64)>,
) -> Result<()> {
    let abs = root.join(std::ffi::OsStr::from_bytes(rel_dir));
    let rd = fs::read_dir(&abs).ctx("read directory", &abs)?;
    for entry in rd {
        let entry = entry.ctx("read directory", &abs)?;
        let name = entry.file_name();
        let mut rel = Vec::with_capacity(rel_dir.len() + 1 + name.len());
        if !rel_dir.is_empty() {
            rel.extend_from_slice(rel_dir);
            rel.push(b'/');
        }
        rel.extend_from_slice(name.as_bytes());
        let ft = entry.file_type().ctx("stat", &entry.path())?;
        if ft.is_dir() {
            if name != ".git" {
                dirs.push((rel, std::os::unix::fs::DirEntryExt::ino(&entry)));
            }
            continue;
        }
        // Relative to the directory already open (fstatat), not a walk of the whole path.
        let m = match entry.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("stat", entry.path(), e)),
        };
        let Some(kind) = NodeKind::from_metadata(&m) else {
            continue;
        };
        out.push((
            Node {
                rel: RelPath::from_bytes(&rel)?,
                kind,
            },
            StatKey::from_metadata(&m),
        ));
    }
    Ok(())
}
