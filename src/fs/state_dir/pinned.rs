//! A directory this process made in a state directory, held by a descriptor from the moment
//! it was made: a mount lands on it (and only on it) wherever someone renamed it, and it is
//! removed only once it is proven to be it, never by re-resolving its name.
//!
//! Another writer in the state directory may exchange names at any moment (an agent, or
//! the chokepoint test's racer swapping `d-x` with a symlink and back). A directory made by
//! `mkdir d-x` and then opened by name could be the other writer's by the time it is opened,
//! and a removal by name could remove the other writer's entry or miss ours, leaving it to
//! come back under its name later. So the directory is made under a private name, opened
//! there, and renamed into place without replacing anything; and it is removed by moving
//! whatever now holds its current name (read from its descriptor) to a private name,
//! checking it is ours (device and inode), and only then removing it — anything else caught
//! that way is put back where it was.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::fs::at::{self, Errno};

use super::ops::{remove_tree_at, rename_noreplace_at};
use super::*;

/// How many times a removal looks for its directory again after another writer moved it
/// between finding it and catching it (each time, it is found where it is now).
const REMOVE_TRIES: usize = 1000;

/// A directory made by [`create_dir_pinned`], held open (`O_PATH`: no read access is kept,
/// and the descriptor pins no mount on top of it).
#[derive(Debug)]
pub struct PinnedDir {
    fd: OwnedFd,
    dev: u64,
    ino: u64,
    /// Where it was made (for messages, and the name it is expected under).
    path: PathBuf,
}

impl PinnedDir {
    /// The descriptor: a mount through `/proc/self/fd/<fd>` lands on this directory.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The path it was made at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it is now, by the kernel's name for the descriptor; `None` once removed.
    pub fn current_path(&self) -> Option<PathBuf> {
        use std::os::fd::AsRawFd;
        let now = std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).ok()?;
        let deleted = now.as_os_str().as_encoded_bytes().ends_with(b" (deleted)");
        (!deleted).then_some(now)
    }

    /// Whether `name` in `dir` is this directory (not following a symlink there).
    fn is(&self, dir: BorrowedFd<'_>, name: &OsStr) -> bool {
        at::lstat(dir, name).is_ok_and(|st| st.st_dev == self.dev && st.st_ino == self.ino)
    }
}

/// Makes the empty directory `p` and holds it: made as `private` (a name nobody else uses,
/// in the same directory), opened there, then renamed to `p` unless something is at `p`
/// (`renameat2(RENAME_NOREPLACE)`). `Ok(None)` when `p` exists: nothing is left (the private
/// directory is removed) and what is at `p` is untouched.
pub fn create_dir_pinned(p: &StatePath, private: &StatePath) -> Result<Option<PinnedDir>> {
    let (dir, name) = p.need_parent("create directory")?;
    let (pdir, pname) = private.need_parent("create directory")?;
    at::mkdir(pdir.as_fd(), &pname, 0o777)
        .map_err(|e| io_err("create directory", &private.full, e))?;
    let pinned = at::hold_dir(pdir.as_fd(), &pname)
        .map_err(|e| io_err("open directory", &private.full, e))
        .and_then(|fd| {
            let st = at::fstat(fd.as_fd()).map_err(|e| io_err("stat", &private.full, e))?;
            Ok(PinnedDir {
                fd,
                dev: st.st_dev,
                ino: st.st_ino,
                path: p.full.clone(),
            })
        });
    let placed = pinned.and_then(|pin| {
        let r = rename_noreplace_at(pdir.as_fd(), &pname, dir.as_fd(), &name, &p.full)?;
        Ok(r.then_some(pin))
    });
    match placed {
        Ok(Some(pin)) => Ok(Some(pin)),
        Ok(None) => {
            remove_tree_at(pdir.as_fd(), &pname, &private.full)?;
            Ok(None)
        }
        Err(e) => {
            let _ = remove_tree_at(pdir.as_fd(), &pname, &private.full);
            Err(e)
        }
    }
}

/// Removes the directory `pin` holds (with whatever is in it; it must not be mounted on),
/// wherever another writer renamed it in `p`'s directory: its current name is read from its
/// descriptor, what is under that name is moved to `private` (a name nobody else uses, in the
/// same directory) without replacing anything, and removed only if it is the pinned
/// directory; anything else caught so is put back under the name it had. An error names what
/// is left: the directory where it is now (moved out of `p`'s directory, or never caught),
/// or a foreign entry that could not be put back (left at `private`).
pub fn remove_pinned_dir(pin: &PinnedDir, p: &StatePath, private: &StatePath) -> Result<()> {
    let (dir, _) = p.need_parent("remove directory")?;
    let (pdir, pname) = private.need_parent("remove directory")?;
    let parent = p.full.parent().unwrap_or(Path::new("/"));
    let left = |at: &Path, why: &str| {
        Error::io(
            "remove directory",
            at,
            std::io::Error::other(format!("{why}; it is left there")),
        )
    };
    for _ in 0..REMOVE_TRIES {
        let Some(now) = pin.current_path() else {
            return Ok(());
        };
        let Some(name) = now
            .file_name()
            .filter(|_| now.parent() == Some(parent))
            .map(OsStr::to_os_string)
        else {
            return Err(left(
                &now,
                "moved out of the session directory by someone else",
            ));
        };
        match at::rename2(
            dir.as_fd(),
            &name,
            pdir.as_fd(),
            &pname,
            at::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {}
            // Renamed again since its name was read: looked up anew.
            Err(Errno::NOENT) => {
                std::thread::yield_now();
                continue;
            }
            Err(Errno::BUSY) => return Err(left(&now, "something is mounted on it")),
            Err(e) => return Err(io_err("rename", &now, e)),
        }
        if pin.is(pdir.as_fd(), &pname) {
            return remove_tree_at(pdir.as_fd(), &pname, &private.full);
        }
        // Someone else's entry took that name in between: back under its name.
        if !rename_noreplace_at(pdir.as_fd(), &pname, dir.as_fd(), &name, &now)? {
            return Err(left(
                &private.full,
                "a foreign entry was caught while removing a directory and its name is taken again",
            ));
        }
        std::thread::yield_now();
    }
    Err(match pin.current_path() {
        Some(now) => left(&now, "it kept being renamed while it was being removed"),
        None => return Ok(()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn session() -> (tempfile::TempDir, StateDir) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().canonicalize().unwrap();
        let s = StateDir::open(&path).unwrap();
        (tmp, s)
    }

    #[test]
    fn a_taken_name_is_left_as_it_is_and_nothing_else_stays() {
        let (_tmp, s) = session();
        let p = s.join(Path::new("d-x")).unwrap();
        std::fs::write(p.as_path(), b"someone else's\n").unwrap();
        let private = s.join(Path::new(".creating-x")).unwrap();
        assert!(create_dir_pinned(&p, &private).unwrap().is_none());
        assert_eq!(std::fs::read(p.as_path()).unwrap(), b"someone else's\n");
        assert!(!private.as_path().exists());
    }

    #[test]
    fn removal_finds_the_directory_where_it_was_renamed_and_spares_what_took_its_name() {
        let (tmp, s) = session();
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let p = s.join(Path::new("d-x")).unwrap();
        let pin = create_dir_pinned(&p, &s.join(Path::new(".creating-x")).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(pin.current_path().as_deref(), Some(p.as_path()));
        // Another writer moves it aside and puts a symlink (and a directory) in its place.
        let aside = s.path().join("d-x.link");
        std::fs::rename(p.as_path(), &aside).unwrap();
        symlink(&victim, p.as_path()).unwrap();
        std::fs::write(aside.join("inside"), b"x").unwrap();
        let private = s.join(Path::new(".trash-x")).unwrap();
        remove_pinned_dir(&pin, &p, &private).unwrap();
        assert!(!aside.exists());
        assert!(std::fs::symlink_metadata(p.as_path()).unwrap().is_symlink());
        assert!(victim.is_dir());
        assert!(!private.as_path().exists());
        // A directory that merely took its name is not it: left alone.
        std::fs::remove_file(p.as_path()).unwrap();
        let pin = create_dir_pinned(&p, &s.join(Path::new(".creating-y")).unwrap())
            .unwrap()
            .unwrap();
        std::fs::rename(p.as_path(), &aside).unwrap();
        std::fs::create_dir(p.as_path()).unwrap();
        std::fs::remove_dir(&aside).unwrap();
        remove_pinned_dir(&pin, &p, &private).unwrap();
        assert!(p.as_path().is_dir());
    }
}
