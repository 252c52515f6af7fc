//! The plan lock: one holder at a time per plan, across threads and processes.
//!
//! Every operation that changes a plan's sandboxes or their originals (`commit_all`, a
//! sandbox's `commit`, `rollback`, `cleanup`, the manager's `rollback_all`, `cleanup_all`,
//! `cleanup_abandoned`, `get_or_create_sandbox`, checkpoint creation and `rollback_to`) runs
//! holding it for its whole length, so two of them — in one process or in two — end as if
//! they had run one after the other. Reads (`list`, `get`, `diff`) do not take it.
//!
//! It is an `flock` on `<plan dir>/commit.lock`, which the kernel releases when the holder
//! dies, whatever killed it: whoever holds the lock therefore knows that no other operation
//! of the plan is running, and that a journal or an in-flight commit it finds was left by a
//! holder that is gone. That is the only proof recovery accepts (see
//! [`crate::plan::manager`]).
//!
//! Two refinements keep that proof true:
//! - **Re-entry.** A thread holding the lock of a plan takes it again for free (the nested
//!   guard holds nothing), and lends it to the worker threads of its own operation
//!   ([`lend`]), which `commit_all`'s commit group uses.
//! - **Inheritance by helper processes.** The git children of a `git_worktree` commit
//!   inherit the lock's descriptor ([`held_fds`]), so the lock outlives a killed committer
//!   until its git has exited: recovery never decides while a git of the commit it settles
//!   can still move the user's branch.
//!
//! A lock file removed while others wait on it (`cleanup_all` removes the plan's directory)
//! would let a waiter hold a lock nobody else can see: after locking, the holder checks that
//! the path still names the file it locked, and starts again otherwise.

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::SandboxError;

/// Name of the lock file in a plan's directory.
pub const LOCK_FILE: &str = "commit.lock";

/// A lock this thread holds (or was lent): the lock file's identity and descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    dev: u64,
    ino: u64,
    fd: RawFd,
}

thread_local! {
    /// The plan locks this thread holds or was lent, innermost last.
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

/// Proof that the current thread holds a plan's lock; released on drop.
///
/// A guard is `fresh` when this acquisition took the lock (nobody in this thread held it):
/// then nothing of the plan is in progress anywhere, and state left in flight is the remains
/// of a holder that is gone. A nested guard (the thread already held it) is not fresh.
#[must_use = "the lock is released when the guard is dropped"]
pub struct PlanGuard {
    /// The locked file and what this thread recorded; `None` for a nested guard.
    file: Option<(File, Held)>,
    plan_dir: PathBuf,
}

fn lock_err(what: &'static str, path: &Path, e: std::io::Error) -> SandboxError {
    SandboxError::from_lower(None, what, crate::Error::io(what, path, e))
}

fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

fn held_here(dev: u64, ino: u64) -> bool {
    HELD.with(|h| h.borrow().iter().any(|x| x.dev == dev && x.ino == ino))
}

impl PlanGuard {
    /// Takes the lock of the plan whose directory is `plan_dir`, waiting for its holder.
    pub fn acquire(plan_dir: &Path) -> Result<PlanGuard, SandboxError> {
        match PlanGuard::take(plan_dir, true)? {
            Some(g) => Ok(g),
            None => Err(SandboxError::sandbox(
                None,
                format!("{}: the plan lock was not taken", plan_dir.display()),
            )),
        }
    }

    /// Takes the lock if nobody holds it; `None` when another thread or process does.
    pub fn try_acquire(plan_dir: &Path) -> Result<Option<PlanGuard>, SandboxError> {
        PlanGuard::take(plan_dir, false)
    }

    /// [`PlanGuard::try_acquire`], trying again for up to `patience`: a lock seen held for
    /// an instant only (a child another thread forks holds a copy of every descriptor until
    /// it executes its program) is not taken for a holder at work.
    pub fn try_acquire_for(
        plan_dir: &Path,
        patience: std::time::Duration,
    ) -> Result<Option<PlanGuard>, SandboxError> {
        patiently(patience, || PlanGuard::take(plan_dir, false))
    }

    fn take(plan_dir: &Path, wait: bool) -> Result<Option<PlanGuard>, SandboxError> {
        use rustix::fs::FlockOperation;
        let path = plan_dir.join(LOCK_FILE);
        loop {
            std::fs::create_dir_all(plan_dir)
                .map_err(|e| lock_err("create plan directory", plan_dir, e))?;
            let f = open_lock_file(&path).map_err(|e| lock_err("open plan lock", &path, e))?;
            let (dev, ino) = identity(
                &f.metadata()
                    .map_err(|e| lock_err("stat plan lock", &path, e))?,
            );
            if held_here(dev, ino) {
                return Ok(Some(PlanGuard {
                    file: None,
                    plan_dir: plan_dir.to_path_buf(),
                }));
            }
            let op = if wait {
                FlockOperation::LockExclusive
            } else {
                FlockOperation::NonBlockingLockExclusive
            };
            match rustix::fs::flock(&f, op) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(None),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(lock_err("lock plan", &path, e.into())),
            }
            // The file may have been removed (and another made) while this one waited.
            match std::fs::metadata(&path) {
                Ok(m) if identity(&m) == (dev, ino) => {}
                _ => continue,
            }
            let held = Held {
                dev,
                ino,
                fd: f.as_raw_fd(),
            };
            HELD.with(|h| h.borrow_mut().push(held));
            return Ok(Some(PlanGuard {
                file: Some((f, held)),
                plan_dir: plan_dir.to_path_buf(),
            }));
        }
    }

    /// Whether this guard took the lock (see the type's docs).
    pub fn is_fresh(&self) -> bool {
        self.file.is_some()
    }

    /// The plan's directory.
    pub fn plan_dir(&self) -> &Path {
        &self.plan_dir
    }

    /// Removes the lock file while holding it (the plan is gone): waiters find it gone when
    /// they get it and start again on a new one.
    pub fn remove_file(&self) {
        let _ = std::fs::remove_file(self.plan_dir.join(LOCK_FILE));
    }
}

impl Drop for PlanGuard {
    fn drop(&mut self) {
        if let Some((_, held)) = &self.file {
            HELD.with(|h| {
                let mut h = h.borrow_mut();
                if let Some(i) = h.iter().rposition(|x| x == held) {
                    h.remove(i);
                }
            });
        }
        // Closing the descriptor releases the flock (never LOCK_UN: a git child that
        // inherited the descriptor keeps the lock until it exits).
    }
}

/// How long a non-blocking `flock` is tried again before a holder is believed: a child that
/// another thread forks holds a copy of every descriptor (and so every lock) for an instant,
/// until it executes its program.
pub const FORK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// Tries a non-blocking exclusive `flock` of `f` for up to [`FORK_PATIENCE`]; whether it was
/// taken.
pub fn flock_exclusive_patiently(f: &File) -> bool {
    let tried: Result<Option<()>, SandboxError> = patiently(FORK_PATIENCE, || {
        Ok(rustix::fs::flock(f, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok())
    });
    matches!(tried, Ok(Some(())))
}

/// Calls `attempt` every 5 ms until it yields something or `patience` has passed.
fn patiently<T>(
    patience: std::time::Duration,
    mut attempt: impl FnMut() -> Result<Option<T>, SandboxError>,
) -> Result<Option<T>, SandboxError> {
    let until = std::time::Instant::now() + patience;
    loop {
        if let Some(t) = attempt()? {
            return Ok(Some(t));
        }
        if std::time::Instant::now() >= until {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Opens (making it if need be) a file whose only use is to be `flock`ed: never truncated,
/// so a holder's file is never disturbed by the next opener.
pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

/// The plan locks of the current thread, lent to worker threads of the same operation.
#[derive(Clone, Debug, Default)]
pub struct Lent(Vec<Held>);

/// Lends every plan lock the current thread holds. The lender must outlive the borrowers
/// (scoped threads): the locks are released when the lender's guards drop.
pub fn lend() -> Lent {
    Lent(HELD.with(|h| h.borrow().clone()))
}

/// While alive, the current thread holds what was lent to it.
pub struct Entered(usize);

impl Lent {
    /// Makes the current thread a holder of the lent locks until the returned value drops.
    pub fn enter(&self) -> Entered {
        HELD.with(|h| h.borrow_mut().extend(self.0.iter().copied()));
        Entered(self.0.len())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            let keep = h.len().saturating_sub(self.0);
            h.truncate(keep);
        });
    }
}

/// The descriptors of the plan locks the current thread holds: a helper process started
/// for the operation inherits them, so the lock is held until it exits too.
pub fn held_fds() -> Vec<RawFd> {
    HELD.with(|h| h.borrow().iter().map(|x| x.fd).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_reenters_and_others_wait() {
        let dir = tempfile::tempdir().unwrap();
        let g = PlanGuard::acquire(dir.path()).unwrap();
        assert!(g.is_fresh());
        let inner = PlanGuard::acquire(dir.path()).unwrap();
        assert!(!inner.is_fresh());
        drop(inner);
        let p = dir.path().to_path_buf();
        let other = std::thread::spawn(move || PlanGuard::try_acquire(&p).unwrap().is_none());
        assert!(
            other.join().unwrap(),
            "another thread must not get the lock"
        );
        let lent = lend();
        let p = dir.path().to_path_buf();
        let borrowed = std::thread::spawn(move || {
            let _e = lent.enter();
            !PlanGuard::acquire(&p).unwrap().is_fresh()
        });
        assert!(borrowed.join().unwrap(), "a borrower re-enters");
        drop(g);
        let p = dir.path().to_path_buf();
        let after = std::thread::spawn(move || PlanGuard::try_acquire(&p).unwrap().is_some());
        assert!(after.join().unwrap());
    }

    #[test]
    fn a_removed_lock_file_is_not_shared() {
        let dir = tempfile::tempdir().unwrap();
        let g = PlanGuard::acquire(dir.path()).unwrap();
        let p = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let g = PlanGuard::acquire(&p).unwrap();
            let m = std::fs::metadata(p.join(LOCK_FILE)).unwrap();
            let (_, held) = g.file.as_ref().unwrap();
            (identity(&m), (held.dev, held.ino))
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        g.remove_file();
        drop(g);
        let (on_disk, held) = waiter.join().unwrap();
        assert_eq!(on_disk, held, "the waiter holds the file the path names");
    }
}
