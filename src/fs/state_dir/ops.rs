//! The chokepoint's operations: every write, rename, removal and stat the library makes in a
//! state directory, each resolving its parent beneath the session's descriptor at the
//! moment of the call and acting on the last component with a `*at` call.

use std::ffi::{CStr, OsStr, OsString};
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::fs::at::{self, Errno};
use crate::fs::Timestamp;

use super::*;

/// Creates a directory and its missing parents; none of them may be a symlink.
pub fn create_dir_all(p: &StatePath) -> Result<()> {
    let Some(rel) = &p.rel else {
        return Ok(());
    };
    let base = p.dir.0.fd.as_fd();
    // Most often it exists already: one call.
    match at::open_beneath(base, rel.as_path()) {
        Ok(_) => return Ok(()),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(p.resolve_err("create directory", e)),
    }
    let mut cur: Option<OwnedFd> = None;
    for c in rel.as_path().components() {
        let at = cur.as_ref().map_or(base, |f| f.as_fd());
        match at::mkdir(at, c.as_os_str(), 0o777) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io_err("create directory", &p.full, e)),
        }
        let next = match at::open_dir(at, c.as_os_str()) {
            Ok(f) => f,
            Err(Errno::NOTDIR) if at::is_symlink(at, c.as_os_str()) => {
                return Err(p.refuse("path goes through a symlink"))
            }
            Err(e) => return Err(p.resolve_err("create directory", e)),
        };
        cur = Some(next);
    }
    Ok(())
}

/// Creates one directory; fails if it exists (so an id in use is never reused silently).
pub fn create_dir_new(p: &StatePath) -> Result<()> {
    let (dir, name) = p.need_parent("create directory")?;
    at::mkdir(dir.as_fd(), &name, 0o777).map_err(|e| io_err("create directory", &p.full, e))
}

/// Removes the directory tree at `dir`, a path the library owns (a sandbox's directory, a
/// shared snapshot), through the chokepoint: its parent is opened as a [`StateDir`] and
/// the tree goes by [`remove_tree`]. A missing `dir` is not an error.
pub fn remove_dir_tree(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(crate::error::Error::io("inspect", dir, e)),
        Ok(_) => {}
    }
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let name = dir
        .file_name()
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    remove_tree(&StateDir::open(parent)?.join(&name)?)
}

/// Removes a directory tree; a missing path is not an error. Symlinks inside are removed,
/// never followed, also one swapped in for a directory while the tree is being removed: the
/// walk goes from directory descriptor to directory descriptor (`openat` with
/// `O_NOFOLLOW`), never by path.
pub fn remove_tree(p: &StatePath) -> Result<()> {
    let Some((dir, name)) = p.parent_at("remove")? else {
        return Ok(());
    };
    if p.rel.is_none() {
        // The state directory itself: emptied through the descriptor this session holds
        // (checked to still be the one at its path by `self_at`).
        let fd = p.open_dir("remove")?;
        empty_dir(fd, &p.full)?;
        return match at::rmdir(dir.as_fd(), &name) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io_err("remove directory", &p.full, e)),
        };
    }
    remove_tree_at(dir.as_fd(), &name, &p.full)
}

/// Removes `name` in `dir`, recursively if it is a directory, following no symlink.
pub(super) fn remove_tree_at(dir: BorrowedFd<'_>, name: &OsStr, display: &Path) -> Result<()> {
    match at::unlink(dir, name) {
        Ok(()) | Err(Errno::NOENT) => return Ok(()),
        // A directory (EISDIR on Linux, EPERM where POSIX allows it): emptied below.
        Err(Errno::ISDIR | Errno::PERM) => {}
        Err(e) => return Err(io_err("remove", display, e)),
    }
    match at::open_dir(dir, name) {
        Ok(fd) => empty_dir(fd, display)?,
        Err(Errno::NOENT) => return Ok(()),
        // Swapped for a symlink or a file since: removed itself, never followed.
        Err(Errno::LOOP | Errno::NOTDIR) => {
            return match at::unlink(dir, name) {
                Ok(()) | Err(Errno::NOENT) => Ok(()),
                Err(e) => Err(io_err("remove", display, e)),
            }
        }
        Err(e) => return Err(io_err("open directory", display, e)),
    }
    match at::rmdir(dir, name) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(io_err("remove directory", display, e)),
    }
}

/// Removes everything inside the open directory `top`, depth first with an explicit stack
/// (a deep tree costs heap, not call stack), never following a symlink.
fn empty_dir(top: OwnedFd, display: &Path) -> Result<()> {
    let open = |fd: OwnedFd, at: &Path| -> Result<at::Dir> {
        at::Dir::new(fd).map_err(|e| io_err("read directory", at, e))
    };
    let mut here = display.to_path_buf();
    let mut stack: Vec<(at::Dir, Option<OsString>)> = vec![(open(top, &here)?, None)];
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
                    match at::rmdir(pfd, &name) {
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
            at::FileType::Directory | at::FileType::Unknown
        );
        if !maybe_dir {
            match at::unlink(dfd, &name) {
                Ok(()) | Err(Errno::NOENT) => continue,
                // Became a directory since it was listed: descend below.
                Err(Errno::ISDIR | Errno::PERM) => {}
                Err(e) => return Err(io_err("remove", &here.join(&name), e)),
            }
        }
        match at::open_dir(dfd, &name) {
            Ok(fd) => {
                here.push(&name);
                let d = open(fd, &here)?;
                stack.push((d, Some(name)));
            }
            Err(Errno::NOENT) => {}
            // Not a directory (or a symlink swapped in): removed itself, never followed.
            Err(Errno::LOOP | Errno::NOTDIR) => match at::unlink(dfd, &name) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(io_err("remove", &here.join(&name), e)),
            },
            Err(e) => return Err(io_err("open directory", &here.join(&name), e)),
        }
    }
    Ok(())
}

/// Removes one file or symlink; a missing path is not an error.
pub fn remove_file(p: &StatePath) -> Result<()> {
    let Some((dir, name)) = p.parent_at("remove file")? else {
        return Ok(());
    };
    match at::unlink(dir.as_fd(), &name) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(io_err("remove file", &p.full, e)),
    }
}

/// Removes an empty directory; a missing or non-empty directory is left alone.
pub fn remove_empty_dir(p: &StatePath) -> Result<bool> {
    let Some((dir, name)) = p.parent_at("remove directory")? else {
        return Ok(false);
    };
    match at::rmdir(dir.as_fd(), &name) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT | Errno::NOTEMPTY | Errno::EXIST) => Ok(false),
        Err(e) => Err(io_err("remove directory", &p.full, e)),
    }
}

/// Renames within the session. A missing `from` is an [`Error::Io`] whose source is of kind
/// `NotFound`.
pub fn rename(from: &StatePath, to: &StatePath) -> Result<()> {
    let (fdir, fname) = from.need_parent("rename")?;
    let (tdir, tname) = to.need_parent("rename")?;
    at::rename(fdir.as_fd(), &fname, tdir.as_fd(), &tname)
        .map_err(|e| io_err("rename", &from.full, e))
}

/// Exchanges the names of `a` and `b` (both must exist), atomically (`renameat2` with
/// `RENAME_EXCHANGE`): a crash leaves each name on one of the two, never on neither.
pub fn exchange(a: &StatePath, b: &StatePath) -> Result<()> {
    let (adir, aname) = a.need_parent("exchange")?;
    let (bdir, bname) = b.need_parent("exchange")?;
    at::rename2(
        adir.as_fd(),
        &aname,
        bdir.as_fd(),
        &bname,
        at::RenameFlags::EXCHANGE,
    )
    .map_err(|e| io_err("exchange", &a.full, e))
}

/// Renames `from` to `to` unless `to` exists, atomically (`renameat2` with
/// `RENAME_NOREPLACE`): `Ok(false)` when it exists, so whatever another writer put there is
/// never replaced.
pub fn rename_noreplace(from: &StatePath, to: &StatePath) -> Result<bool> {
    let (fdir, fname) = from.need_parent("rename")?;
    let (tdir, tname) = to.need_parent("rename")?;
    rename_noreplace_at(fdir.as_fd(), &fname, tdir.as_fd(), &tname, &to.full)
}

pub(super) fn rename_noreplace_at(
    fdir: BorrowedFd<'_>,
    fname: &OsStr,
    tdir: BorrowedFd<'_>,
    tname: &OsStr,
    display: &Path,
) -> Result<bool> {
    match at::rename2(fdir, fname, tdir, tname, at::RenameFlags::NOREPLACE) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        // A filesystem without RENAME_NOREPLACE: for a file, link(2) is just as exclusive.
        Err(Errno::INVAL | Errno::NOSYS) if !at::is_dir(fdir, fname) => {
            match at::link(fdir, fname, tdir, tname) {
                Ok(()) => {
                    at::unlink(fdir, fname)
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

/// Writes `data` to `p` atomically: a temporary file in the same directory is written,
/// fsynced, renamed over `p`, and the directory is fsynced. A crash leaves either the old
/// file or the complete new one, never a partial one.
pub fn write_atomic(p: &StatePath, data: &[u8]) -> Result<()> {
    write_atomic_with(p, data, true, true).map(|_| ())
}

/// [`write_atomic`] without the two `fsync`s: a reader sees the old file or the whole new
/// one even if the writer is killed, but a power loss may lose it (or, on a filesystem that
/// allocates at writeback, leave it empty). Only for records whose loss recovery can make
/// good from what else is on disk: each `fsync` waits for a journal commit, which on a busy
/// journaled filesystem is most of a millisecond-scale operation.
pub fn write_atomic_unsynced(p: &StatePath, data: &[u8]) -> Result<()> {
    write_atomic_with(p, data, true, false).map(|_| ())
}

/// [`write_atomic`] that never replaces: `Ok(false)` (and nothing written) when `p` exists,
/// also when another writer creates it at the same moment. For files whose presence is a
/// record nobody may overwrite (pending patches).
pub fn write_atomic_new(p: &StatePath, data: &[u8]) -> Result<bool> {
    write_atomic_with(p, data, false, true)
}

fn write_atomic_with(p: &StatePath, data: &[u8], replace: bool, durable: bool) -> Result<bool> {
    let (dir, name) = p.need_parent("create temporary file")?;
    let tmp = tmp_name(".", &name, ".tmp");
    let tmp_full = p.full.with_file_name(&tmp);
    let result = (|| {
        let fd = at::create_new(dir.as_fd(), &tmp, 0o644)
            .map_err(|e| io_err("create temporary file", &tmp_full, e))?;
        let mut f = File::from(fd);
        f.write_all(data).ctx("write", &tmp_full)?;
        if durable {
            f.sync_all().ctx("fsync", &tmp_full)?;
        }
        if replace {
            at::rename(dir.as_fd(), &tmp, dir.as_fd(), &name)
                .map_err(|e| io_err("rename into place", &p.full, e))?;
        } else if !rename_noreplace_at(dir.as_fd(), &tmp, dir.as_fd(), &name, &p.full)? {
            return Ok(false);
        }
        if durable {
            let parent = p.full.parent().unwrap_or(Path::new("/"));
            at::fsync(dir.as_fd()).map_err(|e| io_err("fsync directory", parent, e))?;
        }
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        let _ = at::unlink(dir.as_fd(), &tmp);
    }
    result
}

/// Creates or truncates `p` and writes `data`, without fsync: for scratch files whose loss in
/// a crash does not matter (an fsync here would flush every dirty page of a fresh copy).
/// A symlink at `p` is refused, never written through.
pub fn write_scratch(p: &StatePath, data: &[u8]) -> Result<()> {
    write_scratch_with(p, |f| f.write_all(data))
}

/// [`write_scratch`] with the contents written by `fill` into the open file, for a large
/// file produced piece by piece (no buffer of its whole size). An error of `fill` is reported
/// as a write of `p`; the file may then hold part of the contents, as a scratch file may.
pub fn write_scratch_with(
    p: &StatePath,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<()> {
    let (dir, name) = p.need_parent("write")?;
    let fd = match at::open_trunc(dir.as_fd(), &name, 0o666) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Err(p.refuse("path is a symlink")),
        Err(e) => return Err(io_err("write", &p.full, e)),
    };
    fill(&mut File::from(fd)).ctx("write", &p.full)
}

/// [`write_scratch_with`] for a large file that will be made durable soon by someone else's
/// sync (the unmount of an overlay syncs its upper filesystem): its write-back is started
/// as soon as it is written, without waiting for it, so that the sync finds it under way or
/// done rather than starting it then.
pub fn write_scratch_streamed(
    p: &StatePath,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<()> {
    write_scratch_with(p, |f| {
        fill(f)?;
        use std::os::fd::AsRawFd;
        // Only a hint: a filesystem without it loses nothing but the head start.
        // SAFETY: the descriptor is open for the whole call; the call only starts the
        // write-back of the file's dirty pages.
        unsafe {
            libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
        Ok(())
    })
}

/// Writes `data` to a temporary name beside `p` and renames it over `p` (no fsync): a
/// reader never sees a partial file, and concurrent writers of the same content are safe.
pub fn write_file_replace(p: &StatePath, data: &[u8], mode: u32) -> Result<()> {
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
    p: &StatePath,
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
    p: &StatePath,
    scratch: &StatePath,
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
        let fd = at::create_new(tmp_dir, &tmp, mode)
            .map_err(|e| io_err("create temporary file", &tmp_full, e))?;
        let mut f = File::from(fd);
        f.set_permissions(fs::Permissions::from_mode(mode))
            .ctx("set mode", &tmp_full)?;
        if !fill(&mut f, &tmp_full)? {
            return Ok(false);
        }
        at::rename(tmp_dir, &tmp, dir, name)
            .map_err(|e| io_err("rename into place", display, e))?;
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        let _ = at::unlink(tmp_dir, &tmp);
    }
    result
}

/// Makes `dst` a new hard link to the file `src` (a path outside the chokepoint, whose last
/// component is never followed: `linkat` without `AT_SYMLINK_FOLLOW`). `Ok(false)` when `dst`
/// exists already (whatever is there is never replaced). Any other failure (another
/// filesystem, a link count at its limit) is an error the caller may answer by copying.
pub fn link_new(src: &Path, dst: &StatePath) -> Result<bool> {
    let (dir, name) = dst.need_parent("link")?;
    match at::link(at::CWD, src, dir.as_fd(), &name) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        Err(e) => Err(io_err("link", &dst.full, e)),
    }
}

/// Creates a symlink at `dst` pointing to `target` (stored as is, never resolved).
pub fn create_symlink(target: &Path, dst: &StatePath) -> Result<()> {
    let (dir, name) = dst.need_parent("create symlink")?;
    at::symlink(target, dir.as_fd(), &name).map_err(|e| io_err("create symlink", &dst.full, e))
}

/// Makes an OverlayFS whiteout at `p` (a character device 0/0, which hides whatever lower
/// layers hold at that path); `p` must not exist. Needs `CAP_MKNOD`.
pub fn create_whiteout(p: &StatePath) -> Result<()> {
    let (dir, name) = p.need_parent("create whiteout")?;
    at::mknod_whiteout(dir.as_fd(), &name).map_err(|e| io_err("create whiteout", &p.full, e))
}

/// Sets the modification time of `p` without following a symlink at `p`.
pub fn set_mtime(p: &StatePath, mtime: Timestamp) -> Result<()> {
    let (dir, name) = p.need_parent("set mtime")?;
    at::set_mtime(dir.as_fd(), &name, mtime).map_err(|e| io_err("set mtime", &p.full, e))
}

/// The metadata of what is at `p`, not following a symlink there (`lstat`), read relative
/// to its parent directory opened beneath the state directory.
pub fn symlink_metadata(p: &StatePath) -> Result<fs::Metadata> {
    let fd = match &p.rel {
        None => p.open_dir("stat")?,
        Some(_) => {
            let (dir, name) = p.need_parent("stat")?;
            at::open_meta(dir.as_fd(), &name).map_err(|e| io_err("stat", &p.full, e))?
        }
    };
    File::from(fd).metadata().ctx("stat", &p.full)
}

/// Whether anything (a symlink included) is at `p`. A path through a symlink is refused.
pub fn exists(p: &StatePath) -> Result<bool> {
    let Some((dir, name)) = p.parent_at("inspect")? else {
        return Ok(false);
    };
    match at::lstat(dir.as_fd(), &name) {
        Ok(_) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(io_err("inspect", &p.full, e)),
    }
}

/// Opens (creating) a file for locking and metadata; never truncates, never follows a
/// symlink.
pub fn open_lock_file(p: &StatePath) -> Result<File> {
    let (dir, name) = p.need_parent("open lock file")?;
    match at::open_rw_create(dir.as_fd(), &name, 0o644) {
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

pub(super) fn create_file_new_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    display: &Path,
    mode: u32,
) -> Result<File> {
    let fd = at::create_new(dir, name, mode).map_err(|e| io_err("create", display, e))?;
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
pub fn create_file_new(p: &StatePath, mode: u32) -> Result<File> {
    let (dir, name) = p.need_parent("create")?;
    create_file_new_at(dir.as_fd(), &name, &p.full, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A state directory with `sub/` in it, and a victim directory outside.
    fn setup() -> (tempfile::TempDir, StateDir, PathBuf) {
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
        let sd = StateDir::open(&s).unwrap();
        (t, sd, victim)
    }

    /// Replaces `sub/` by a symlink to the victim, after the path was obtained.
    fn swap(sd: &StateDir, victim: &Path) {
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
        refused(set_mtime(&keep, crate::fs::Timestamp::new(1, 0)));
        refused(open_lock_file(&new));
        refused(create_file_new(&new, 0o644));
        refused(symlink_metadata(&keep));
        refused(exists(&keep));
        refused(open_dir(&inner));
        victim_untouched(&victim);
        // The up-front check refuses them too, now.
        refused(sd.join(Path::new("sub/keep")));
        refused(sd.join(Path::new("sub")));
        // The state directory's own files are still reachable.
        assert!(exists(&here).unwrap());
    }

    #[test]
    fn the_walk_without_openat2_refuses_symlinks_too() {
        let (_t, sd, victim) = setup();
        let base = sd.0.fd.as_fd();
        assert!(at::walk_beneath(base, Path::new("sub/inner")).is_ok());
        assert!(at::walk_beneath(base, Path::new("")).is_ok());
        swap(&sd, &victim);
        assert_eq!(
            at::walk_beneath(base, Path::new("sub/inner")).err(),
            Some(Errno::LOOP)
        );
        assert_eq!(
            at::walk_beneath(base, Path::new("sub")).err(),
            Some(Errno::LOOP)
        );
        assert_eq!(
            at::walk_beneath(base, Path::new("../x")).err(),
            Some(Errno::XDEV)
        );
        // And openat2 itself, where the kernel has it.
        assert_eq!(
            at::open_beneath(base, Path::new("sub/inner")).err(),
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
        // Nothing but removal acts on the state directory itself (its parent is the root).
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
        d.set_mtime(OsStr::new("l"), crate::fs::Timestamp::new(7, 0))
            .unwrap();
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
