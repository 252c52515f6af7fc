//! The session chokepoint: every write, rename and removal the library makes inside a
//! session directory goes through a helper here, and each takes a [`SessionPath`].
//!
//! [`path_in_session_base`] is the only way to obtain a [`SessionPath`], so code elsewhere in
//! the crate cannot write outside a session directory without the compiler noticing. The
//! layout of what lives in a session directory is [`crate::session::layout`]'s.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;

/// A path proven to lie inside a session directory, with no symlink between the session
/// directory and it (the path itself included).
///
/// Only [`path_in_session_base`] and `SessionPath::child` (crate-private) build one; the write helpers of
/// this module accept nothing else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionPath(PathBuf);

impl SessionPath {
    /// The path.
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// A path below this one. The join is lexically contained (a [`RelPath`] has no `..`);
    /// it is meant for trees the library creates itself (copying a snapshot), where every
    /// intermediate directory is made by the library and so cannot be a symlink.
    pub(crate) fn child(&self, rel: &RelPath) -> SessionPath {
        SessionPath(self.0.join(rel.as_path()))
    }
}

impl AsRef<Path> for SessionPath {
    fn as_ref(&self) -> &Path {
        &self.0
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

/// The chokepoint: proves that `candidate` lies inside `session_dir` and returns it as a
/// [`SessionPath`].
///
/// `session_dir` must be the canonical path of a session directory. `candidate` may be
/// absolute or relative to `session_dir`. Refused: any `..` component; a path outside
/// `session_dir` (compared by components, so `/x/sandbox-backup` is not inside
/// `/x/sandbox`); a path through or at a symlink anywhere from `session_dir` down (a
/// `pending/` or `d-x/` replaced by a link pointing elsewhere); a `session_dir` that is
/// itself no longer a real directory.
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
    let refuse = |reason| {
        Err(Error::Containment {
            path: candidate.to_path_buf(),
            base: session_dir.to_path_buf(),
            reason,
        })
    };
    let joined = if candidate.is_absolute() {
        candidate.to_path_buf()
    } else {
        session_dir.join(candidate)
    };
    let Some(norm) = lexical_normalize(&joined) else {
        return refuse("path contains '..'");
    };
    let Ok(rest) = norm.strip_prefix(session_dir) else {
        return refuse("path is not below the session directory");
    };
    match fs::symlink_metadata(session_dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return refuse("session directory is not a real directory"),
        Err(e) => return Err(Error::io("check session directory", session_dir, e)),
    }
    let mut cur = session_dir.to_path_buf();
    for c in rest.components() {
        cur.push(c);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return refuse("path goes through a symlink"),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(Error::io("check path", &cur, e)),
        }
    }
    Ok(SessionPath(norm))
}

/// Creates a directory and its missing parents.
pub fn create_dir_all(p: &SessionPath) -> Result<()> {
    fs::create_dir_all(&p.0).ctx("create directory", &p.0)
}

/// Creates one directory; fails if it exists (so an id in use is never reused silently).
pub fn create_dir_new(p: &SessionPath) -> Result<()> {
    fs::create_dir(&p.0).ctx("create directory", &p.0)
}

/// Removes a directory tree; a missing path is not an error. Symlinks inside are removed,
/// never followed.
pub fn remove_tree(p: &SessionPath) -> Result<()> {
    match fs::symlink_metadata(&p.0) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("inspect", &p.0, e)),
        Ok(m) if m.is_dir() => match fs::remove_dir_all(&p.0) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r.ctx("remove directory", &p.0),
        },
        Ok(_) => remove_file(p),
    }
}

/// Removes one file or symlink; a missing path is not an error.
pub fn remove_file(p: &SessionPath) -> Result<()> {
    match fs::remove_file(&p.0) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r.ctx("remove file", &p.0),
    }
}

/// Removes an empty directory; a missing or non-empty directory is left alone.
pub fn remove_empty_dir(p: &SessionPath) -> Result<bool> {
    match fs::remove_dir(&p.0) {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::DirectoryNotEmpty
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::io("remove directory", &p.0, e)),
    }
}

/// Renames within the session.
pub fn rename(from: &SessionPath, to: &SessionPath) -> Result<()> {
    fs::rename(&from.0, &to.0).ctx("rename", &from.0)
}

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
    let dir = p.0.parent().unwrap_or(Path::new("/"));
    let name =
        p.0.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", ulid::Ulid::new()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .ctx("create temporary file", &tmp)?;
        f.write_all(data).ctx("write", &tmp)?;
        f.sync_all().ctx("fsync", &tmp)?;
        if replace {
            fs::rename(&tmp, &p.0).ctx("rename into place", &p.0)?;
        } else if !rename_noreplace_raw(&tmp, &p.0)? {
            return Ok(false);
        }
        File::open(dir)
            .and_then(|d| d.sync_all())
            .ctx("fsync directory", dir)?;
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Renames `from` to `to` unless `to` exists, atomically (`renameat2` with
/// `RENAME_NOREPLACE`): `Ok(false)` when it exists, so whatever another writer put there is
/// never replaced.
pub fn rename_noreplace(from: &SessionPath, to: &SessionPath) -> Result<bool> {
    rename_noreplace_raw(&from.0, &to.0)
}

fn rename_noreplace_raw(from: &Path, to: &Path) -> Result<bool> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        // A filesystem without RENAME_NOREPLACE: for a file, link(2) is just as exclusive.
        Err(Errno::INVAL | Errno::NOSYS) if !from.is_dir() => match fs::hard_link(from, to) {
            Ok(()) => {
                fs::remove_file(from).ctx("remove after linking", from)?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io("link into place", to, e)),
        },
        Err(e) => Err(Error::io("rename without replacing", to, e.into())),
    }
}

/// Creates or truncates `p` and writes `data`, without fsync: for scratch files whose loss in
/// a crash does not matter (an fsync here would flush every dirty page of a fresh copy).
pub fn write_scratch(p: &SessionPath, data: &[u8]) -> Result<()> {
    fs::write(&p.0, data).ctx("write", &p.0)
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
    let dir = p.0.parent().unwrap_or(Path::new("/"));
    replace_through(p, dir, mode, fill)
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
    replace_through(p, &scratch.0, mode, fill)
}

fn replace_through(
    p: &SessionPath,
    tmp_dir: &Path,
    mode: u32,
    fill: impl FnOnce(&mut File, &Path) -> Result<bool>,
) -> Result<bool> {
    let tmp = tmp_dir.join(format!(".tmp-{}", ulid::Ulid::new()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .ctx("create temporary file", &tmp)?;
        f.set_permissions(fs::Permissions::from_mode(mode))
            .ctx("set mode", &tmp)?;
        if !fill(&mut f, &tmp)? {
            return Ok(false);
        }
        fs::rename(&tmp, &p.0).ctx("rename into place", &p.0)?;
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates a symlink at `dst` pointing to `target` (stored as is, never resolved).
pub fn create_symlink(target: &Path, dst: &SessionPath) -> Result<()> {
    symlink(target, &dst.0).ctx("create symlink", &dst.0)
}

/// Sets the modification time of `p` without following a symlink at `p`.
pub fn set_mtime(p: &SessionPath, mtime: (i64, i64)) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.0.as_os_str().as_bytes()).map_err(|_| {
        Error::io(
            "set mtime",
            &p.0,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"),
        )
    })?;
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: mtime.0 as libc::time_t,
            tv_nsec: mtime.1 as libc::c_long,
        },
    ];
    // SAFETY: `c` is a valid NUL-terminated path and `times` points to two timespecs.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(Error::io(
            "set mtime",
            &p.0,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Opens (creating) a file for locking and metadata; never truncates.
pub fn open_lock_file(p: &SessionPath) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(&p.0)
        .ctx("open lock file", &p.0)
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

/// Creates a new regular file (it must not exist) with the given permission bits.
pub fn create_file_new(p: &SessionPath, mode: u32) -> Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&p.0)
        .ctx("create", &p.0)?;
    // The umask may have cleared owner bits of `mode` (those git records); only then is a
    // chmod needed.
    if mode & process_umask() & 0o700 != 0 {
        f.set_permissions(fs::Permissions::from_mode(mode))
            .ctx("set mode", &p.0)?;
    }
    Ok(f)
}
