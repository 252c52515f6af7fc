//! Directory handles for the copy engine: a directory the library made (a `.creating-*`
//! sandbox), opened once beneath the session's descriptor, in which files and directories are
//! made relative to descriptors the copy threads hold.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::fs::at::{self, Errno};
use crate::fs::Timestamp;

use super::ops::create_file_new_at;
use super::*;

/// A directory opened beneath a state directory (no symlink on the way), whose entries
/// are made relative to its descriptor: the copy engine holds one per directory it fills, so
/// a file costs one `openat` of its own name, not a walk of its whole path.
pub struct DirHandle {
    fd: OwnedFd,
    path: PathBuf,
}

impl std::fmt::Debug for DirHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DirHandle").field(&self.path).finish()
    }
}

/// Opens the directory `p` beneath its state directory.
pub fn open_dir(p: &StatePath) -> Result<DirHandle> {
    Ok(DirHandle {
        fd: p.open_dir("open directory")?,
        path: p.full.clone(),
    })
}

impl DirHandle {
    /// Its path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn refuse(&self, rel: &Path, reason: &'static str) -> Error {
        Error::Containment {
            path: self.path.join(rel),
            base: self.path.clone(),
            reason,
        }
    }

    /// Opens the directory `rel` below this one, following no symlink.
    pub fn open_subdir(&self, rel: &RelPath) -> Result<DirHandle> {
        let path = self.path.join(rel.as_path());
        match at::open_beneath(self.fd.as_fd(), rel.as_path()) {
            Ok(fd) => Ok(DirHandle { fd, path }),
            Err(Errno::LOOP) => Err(self.refuse(rel.as_path(), "path goes through a symlink")),
            Err(e) => Err(io_err("open directory", &path, e)),
        }
    }

    /// Creates the directories `dirs` (relative to this one) and their missing parents.
    /// Given in path order (every directory's descendants together, as in a sorted node
    /// list), each directory costs one `mkdirat`, plus one `openat` when something is made
    /// inside it; in any order the result is the same, only slower.
    pub fn create_dirs<'a>(&self, dirs: impl IntoIterator<Item = &'a RelPath>) -> Result<()> {
        // The directories of the current path, opened when something was made inside.
        let mut stack: Vec<(OsString, Option<OwnedFd>)> = Vec::new();
        for rel in dirs {
            let comps: Vec<&OsStr> = rel.as_path().iter().collect();
            let common = stack
                .iter()
                .zip(&comps)
                .take_while(|((have, _), want)| have.as_os_str() == **want)
                .count();
            stack.truncate(common);
            for c in &comps[common..] {
                let at = match stack.last_mut() {
                    None => self.fd.as_fd(),
                    Some((_, fd)) => {
                        if fd.is_none() {
                            // Open the parent, by name, from its own parent's descriptor.
                            let n = stack.len();
                            let (name, pfd) = {
                                let pfd = if n >= 2 {
                                    stack[n - 2].1.as_ref().map(|f| f.as_fd())
                                } else {
                                    Some(self.fd.as_fd())
                                };
                                (stack[n - 1].0.clone(), pfd)
                            };
                            let shown: PathBuf = stack.iter().map(|(n, _)| n).collect();
                            let pfd = pfd.ok_or_else(|| {
                                self.refuse(&shown, "parent directory was not opened")
                            })?;
                            let opened = match at::open_dir(pfd, &name) {
                                Ok(f) => f,
                                Err(Errno::LOOP) => {
                                    return Err(self.refuse(&shown, "path goes through a symlink"))
                                }
                                Err(Errno::NOTDIR) if at::is_symlink(pfd, &name) => {
                                    return Err(self.refuse(&shown, "path goes through a symlink"))
                                }
                                Err(e) => {
                                    return Err(io_err(
                                        "open directory",
                                        &self.path.join(&shown),
                                        e,
                                    ))
                                }
                            };
                            stack[n - 1].1 = Some(opened);
                        }
                        match stack.last().and_then(|(_, fd)| fd.as_ref()) {
                            Some(fd) => fd.as_fd(),
                            None => return Err(self.refuse(rel.as_path(), "directory not opened")),
                        }
                    }
                };
                match at::mkdir(at, *c, 0o777) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => {
                        return Err(io_err(
                            "create directory",
                            &self.path.join(rel.as_path()),
                            e,
                        ))
                    }
                }
                stack.push((c.to_os_string(), None));
            }
        }
        Ok(())
    }

    /// Creates the new regular file `name` in this directory (it must not exist).
    pub fn create_file_new(&self, name: &OsStr, mode: u32) -> Result<File> {
        create_file_new_at(self.fd.as_fd(), name, &self.path.join(name), mode)
    }

    /// Creates the symlink `name` → `target` in this directory.
    pub fn create_symlink(&self, target: &Path, name: &OsStr) -> Result<()> {
        at::symlink(target, self.fd.as_fd(), name)
            .map_err(|e| io_err("create symlink", &self.path.join(name), e))
    }

    /// Makes `name` in this directory a new hard link to `src` (a symlink is linked itself,
    /// not followed). `false` when no link is made here for a reason a copy would not meet
    /// (`src` on another filesystem or gone, its link count at the limit, links refused), so
    /// the caller can copy instead.
    pub fn link_from(&self, src: &Path, name: &OsStr) -> Result<bool> {
        match at::link(at::CWD, src, self.fd.as_fd(), name) {
            Ok(()) => Ok(true),
            Err(Errno::XDEV | Errno::MLINK | Errno::PERM | Errno::OPNOTSUPP | Errno::NOENT) => {
                Ok(false)
            }
            Err(e) => Err(io_err("link", &self.path.join(name), e)),
        }
    }

    /// Sets the modification time of `name` without following a symlink.
    pub fn set_mtime(&self, name: &OsStr, mtime: Timestamp) -> Result<()> {
        at::set_mtime(self.fd.as_fd(), name, mtime)
            .map_err(|e| io_err("set mtime", &self.path.join(name), e))
    }

    /// The `lstat` metadata of `name`.
    pub fn symlink_metadata(&self, name: &OsStr) -> Result<fs::Metadata> {
        let shown = self.path.join(name);
        let fd = at::open_meta(self.fd.as_fd(), name).map_err(|e| io_err("stat", &shown, e))?;
        File::from(fd).metadata().ctx("stat", &shown)
    }

    /// The raw `lstat` of `name` (one `fstatat`, for the copy engine's stat keys).
    pub(crate) fn lstat(&self, name: &OsStr) -> Result<at::Stat> {
        at::lstat(self.fd.as_fd(), name).map_err(|e| io_err("stat", &self.path.join(name), e))
    }

    /// Removes the file or symlink `name`; a missing one is not an error.
    pub fn remove_file(&self, name: &OsStr) -> Result<()> {
        match at::unlink(self.fd.as_fd(), name) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io_err("remove file", &self.path.join(name), e)),
        }
    }
}
