//! Opening: a directory one component down without following a symlink, a directory path
//! beneath a descriptor (`openat2(RESOLVE_BENEATH)`, or a walk of such opens), and the
//! files the chokepoints read, create and stage.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::path::Arg;

use super::{is_symlink, AtResult, Errno};

/// A directory opened for `*at` calls, never through a symlink at its last component.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// A new regular file: never an existing name, never through a symlink.
const NEW_FILE: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::EXCL)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens the directory `name` in `dir` (`O_DIRECTORY | O_NOFOLLOW`): a symlink there fails
/// (`ELOOP` or `ENOTDIR`, depending on the system; see [`super::is_symlink_error`]).
#[inline]
pub(crate) fn open_dir<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<OwnedFd> {
    rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())
}

/// Opens the directory at `path`, following symlinks on the way (a root the caller named).
pub(crate) fn open_path_dir(path: &Path) -> AtResult<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the directory at `path`, refusing a symlink at its last component.
pub(crate) fn open_path_dir_nofollow(path: &Path) -> AtResult<OwnedFd> {
    rustix::fs::open(path, DIR_FLAGS, Mode::empty())
}

/// Set once `openat2` turned out to be missing (kernel before 5.6, or a seccomp filter).
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens the directory `rel` (relative, normal components) beneath `base`, following no
/// symlink on the way (`ELOOP` if there is one) and never leaving `base` (`EXDEV`): one
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, or [`walk_beneath`] where the kernel
/// lacks it.
pub(crate) fn open_beneath(base: BorrowedFd<'_>, rel: &Path) -> AtResult<OwnedFd> {
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
    walk_beneath(base, rel)
}

/// [`open_beneath`] without `openat2`: one [`open_dir`] per component.
pub(crate) fn walk_beneath(base: BorrowedFd<'_>, rel: &Path) -> AtResult<OwnedFd> {
    let mut cur: Option<OwnedFd> = None;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            // A RelPath has only normal components; anything else is refused as an escape.
            return Err(Errno::XDEV);
        };
        let at = cur.as_ref().map_or(base, |f| f.as_fd());
        let next = match open_dir(at, name) {
            Ok(f) => f,
            Err(Errno::NOTDIR) if is_symlink(at, name) => return Err(Errno::LOOP),
            Err(e) => return Err(e),
        };
        cur = Some(next);
    }
    match cur {
        Some(f) => Ok(f),
        None => open_dir(base, c"."),
    }
}

/// Opens the file `name` in `dir` for reading, not following a symlink and not waiting on
/// a FIFO.
#[inline]
pub(crate) fn open_read<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    rustix::fs::openat(dir, name, flags, Mode::empty())
}

/// Creates the new regular file `name` in `dir` with `mode` (less the umask); it must not
/// exist, and a symlink there is not followed.
#[inline]
pub(crate) fn create_new<P: Arg>(dir: BorrowedFd<'_>, name: P, mode: u32) -> AtResult<OwnedFd> {
    rustix::fs::openat(dir, name, NEW_FILE, Mode::from_raw_mode(mode))
}

/// Opens `name` in `dir` for writing, creating or truncating it; a symlink there fails
/// with `ELOOP`.
pub(crate) fn open_trunc<P: Arg>(dir: BorrowedFd<'_>, name: P, mode: u32) -> AtResult<OwnedFd> {
    let flags =
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(mode))
}

/// Opens `name` in `dir` for reading and writing, creating it, never truncating; a symlink
/// there fails with `ELOOP`.
pub(crate) fn open_rw_create<P: Arg>(dir: BorrowedFd<'_>, name: P, mode: u32) -> AtResult<OwnedFd> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(mode))
}

/// A descriptor of `name` in `dir` for `fstat` only (`O_PATH | O_NOFOLLOW`: a symlink is the
/// link itself).
pub(crate) fn open_meta<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// A nameless regular file (`O_TMPFILE`, mode 0600) on the filesystem of `dir`, its inode
/// allocated near it; [`link_tmpfile`] names it.
pub(crate) fn tmpfile(dir: BorrowedFd<'_>) -> AtResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        c".",
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
}

/// Names the nameless file `file` (from [`tmpfile`]) `name` in `dir`, never replacing
/// anything (`EEXIST`). Before Linux 6.10 `linkat(AT_EMPTY_PATH)` needs
/// `CAP_DAC_READ_SEARCH`; where it is refused, the descriptor's `/proc` link (which does
/// not) is linked instead.
pub(crate) fn link_tmpfile<P: Arg + Copy>(
    file: BorrowedFd<'_>,
    dir: BorrowedFd<'_>,
    name: P,
) -> AtResult<()> {
    match rustix::fs::linkat(file, c"", dir, name, AtFlags::EMPTY_PATH) {
        Err(Errno::PERM | Errno::NOENT) => {
            let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
            rustix::fs::linkat(
                rustix::fs::CWD,
                OsStr::new(&proc),
                dir,
                name,
                AtFlags::SYMLINK_FOLLOW,
            )
        }
        r => r,
    }
}

/// A descriptor that holds the directory `name` in `dir` without read access
/// (`O_PATH | O_DIRECTORY | O_NOFOLLOW`): it names the directory wherever it is renamed,
/// and pins no mount on top of it.
pub(crate) fn hold_dir<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<OwnedFd> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::empty())
}
