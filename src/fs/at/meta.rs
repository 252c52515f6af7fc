//! What is at a name and its times and mode, and bringing a file or a filesystem to disk.

use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::fs::{AtFlags, FileType, Mode, Stat, Timespec, Timestamps, UTIME_OMIT};
use rustix::path::Arg;

use super::{AtResult, Errno};
use crate::fs::Timestamp;

/// The metadata of `name` in `dir`, not following a symlink there (`lstat`).
#[inline]
pub(crate) fn lstat<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// The metadata of an open descriptor.
#[inline]
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> AtResult<Stat> {
    rustix::fs::fstat(fd)
}

/// The file type in a stat's mode.
#[inline]
fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode as _)
}

/// Whether `name` in `dir` is a symlink (not followed).
pub(crate) fn is_symlink<P: Arg>(dir: BorrowedFd<'_>, name: P) -> bool {
    lstat(dir, name).is_ok_and(|st| file_type(&st) == FileType::Symlink)
}

/// Whether `name` in `dir` is a directory (a symlink to one is not).
pub(crate) fn is_dir<P: Arg>(dir: BorrowedFd<'_>, name: P) -> bool {
    lstat(dir, name).is_ok_and(|st| file_type(&st) == FileType::Directory)
}

/// Whether `e`, from opening `name` in `dir` with `O_DIRECTORY | O_NOFOLLOW`, means a
/// symlink is there: `ELOOP`, or `ENOTDIR` where the system says that (then looked at).
pub(crate) fn is_symlink_error<P: Arg>(e: Errno, dir: BorrowedFd<'_>, name: P) -> bool {
    match e {
        Errno::LOOP => true,
        Errno::NOTDIR => is_symlink(dir, name),
        _ => false,
    }
}

/// The times that set only the modification time to `(seconds, nanoseconds)`.
fn mtime_only(t: Timestamp) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: t.secs,
            tv_nsec: t.nanos as _,
        },
    }
}

/// Sets the modification time of `name` in `dir`, not following a symlink there.
#[inline]
pub(crate) fn set_mtime<P: Arg>(dir: BorrowedFd<'_>, name: P, t: Timestamp) -> AtResult<()> {
    rustix::fs::utimensat(dir, name, &mtime_only(t), AtFlags::SYMLINK_NOFOLLOW)
}

/// Sets the modification time of an open descriptor.
#[inline]
pub(crate) fn set_fd_mtime(fd: BorrowedFd<'_>, t: Timestamp) -> AtResult<()> {
    rustix::fs::futimens(fd, &mtime_only(t))
}

/// Sets the permission bits (`& 0o7777`) of an open descriptor.
#[inline]
pub(crate) fn chmod(fd: BorrowedFd<'_>, perm: u32) -> AtResult<()> {
    rustix::fs::fchmod(fd, Mode::from_raw_mode(perm & 0o7777))
}

/// Brings an open file or directory to disk.
#[inline]
pub(crate) fn fsync(fd: BorrowedFd<'_>) -> AtResult<()> {
    rustix::fs::fsync(fd)
}

/// Brings the whole filesystem of `fd` to disk: one journal commit for everything staged.
#[inline]
pub(crate) fn syncfs(fd: BorrowedFd<'_>) -> AtResult<()> {
    rustix::fs::syncfs(fd)
}

/// Starts the writeback of a file just written (`sync_file_range(SYNC_FILE_RANGE_WRITE)`,
/// the batch flush `git` does), so that a later [`syncfs`] finds it under way. Only a
/// hint: an error is of no consequence, the sync still covers the file.
pub(crate) fn start_writeback(fd: BorrowedFd<'_>) {
    // `rustix` has no `sync_file_range`.
    // SAFETY: `fd` is an open descriptor borrowed for the call; offset 0 and length 0 name
    // the whole file; the call reads and writes no memory of this process.
    unsafe { libc::sync_file_range(fd.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}
