//! Names in a directory: making, removing, renaming and linking them, each one `*at` call
//! relative to the parent's descriptor that never follows a symlink at the name.

use std::os::fd::BorrowedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, RenameFlags};
use rustix::path::Arg;

use super::AtResult;

/// Makes the directory `name` in `dir` with `mode` (less the umask).
#[inline]
pub(crate) fn mkdir<P: Arg>(dir: BorrowedFd<'_>, name: P, mode: u32) -> AtResult<()> {
    rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))
}

/// Removes the file or symlink `name` in `dir` (a directory: `EISDIR`).
#[inline]
pub(crate) fn unlink<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<()> {
    rustix::fs::unlinkat(dir, name, AtFlags::empty())
}

/// Removes the empty directory `name` in `dir`.
#[inline]
pub(crate) fn rmdir<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<()> {
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
}

/// Renames `from` in `fdir` to `to` in `tdir`, replacing what is there.
#[inline]
pub(crate) fn rename<P: Arg, Q: Arg>(
    fdir: BorrowedFd<'_>,
    from: P,
    tdir: BorrowedFd<'_>,
    to: Q,
) -> AtResult<()> {
    rustix::fs::renameat(fdir, from, tdir, to)
}

/// `renameat2`: [`RenameFlags::NOREPLACE`] renames unless `to` exists (`EEXIST`),
/// [`RenameFlags::EXCHANGE`] swaps two existing names, each atomically. `EINVAL`, `ENOSYS`
/// or `EOPNOTSUPP`: the kernel or the filesystem cannot, nothing was changed.
#[inline]
pub(crate) fn rename2<P: Arg, Q: Arg>(
    fdir: BorrowedFd<'_>,
    from: P,
    tdir: BorrowedFd<'_>,
    to: Q,
    how: RenameFlags,
) -> AtResult<()> {
    rustix::fs::renameat_with(fdir, from, tdir, to, how)
}

/// Makes `to` in `tdir` a new hard link to `from` in `fdir` (a symlink at `from` is linked
/// itself, not followed); an existing `to` is never replaced (`EEXIST`).
#[inline]
pub(crate) fn link<P: Arg, Q: Arg>(
    fdir: BorrowedFd<'_>,
    from: P,
    tdir: BorrowedFd<'_>,
    to: Q,
) -> AtResult<()> {
    rustix::fs::linkat(fdir, from, tdir, to, AtFlags::empty())
}

/// [`link`] of `name` in `dir` to `dest`, a path outside any chokepoint.
pub(crate) fn link_out<P: Arg>(dir: BorrowedFd<'_>, name: P, dest: &Path) -> AtResult<()> {
    rustix::fs::linkat(dir, name, rustix::fs::CWD, dest, AtFlags::empty())
}

/// Makes the symlink `name` in `dir` pointing to `target` (stored as is, never resolved).
#[inline]
pub(crate) fn symlink<T: Arg, P: Arg>(target: T, dir: BorrowedFd<'_>, name: P) -> AtResult<()> {
    rustix::fs::symlinkat(target, dir, name)
}

/// The target of the symlink `name` in `dir`.
pub(crate) fn readlink<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<Vec<u8>> {
    rustix::fs::readlinkat(dir, name, Vec::new()).map(|t| t.into_bytes())
}

/// Makes an OverlayFS whiteout `name` in `dir` (a character device 0/0); needs
/// `CAP_MKNOD`.
pub(crate) fn mknod_whiteout<P: Arg>(dir: BorrowedFd<'_>, name: P) -> AtResult<()> {
    rustix::fs::mknodat(dir, name, FileType::CharacterDevice, Mode::empty(), 0)
}
