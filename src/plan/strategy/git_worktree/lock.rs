//! The per-repository lock: git operations on one repository are serialized, within the
//! process by a mutex keyed by the canonical common git dir, and across the processes
//! sharing one root by an `flock` on `<plans dir>/git-locks/<sha1 of the common dir>.lock`.
//!
//! The lock file lives under the plans directory, so nothing is written into the user's
//! `.git` for locking.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::plan::error::SandboxError;

/// The directory of the lock files, under the plans directory.
const LOCKS_DIR: &str = "git-locks";

/// The process-wide locks, one per repository (canonical common git dir).
fn repo_locks() -> &'static parking_lot::Mutex<HashMap<PathBuf, Arc<parking_lot::Mutex<()>>>> {
    static LOCKS: OnceLock<parking_lot::Mutex<HashMap<PathBuf, Arc<parking_lot::Mutex<()>>>>> =
        OnceLock::new();
    LOCKS.get_or_init(Default::default)
}

/// Runs `f` holding the repository's locks: the process-wide one, then an `flock` on
/// `<plans dir>/git-locks/<sha1 of the common dir>.lock` for other processes.
pub(super) fn with_repo_lock<R>(
    plans_dir: &Path,
    common_dir: &Path,
    f: impl FnOnce() -> Result<R, SandboxError>,
) -> Result<R, SandboxError> {
    use sha1::{Digest, Sha1};
    let key = std::fs::canonicalize(common_dir).unwrap_or_else(|_| common_dir.to_path_buf());
    let m = repo_locks().lock().entry(key.clone()).or_default().clone();
    let _held = m.lock();
    let dir = plans_dir.join(LOCKS_DIR);
    let lower = |what: &str, e: std::io::Error, p: &Path| {
        SandboxError::from_lower(None, what, crate::Error::io("lock", p, e))
    };
    std::fs::create_dir_all(&dir).map_err(|e| lower("create the git lock directory", e, &dir))?;
    let digest = Sha1::digest(key.as_os_str().as_encoded_bytes());
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let p = dir.join(format!("{name}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| lower("open the repository lock", e, &p))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| lower("lock the repository", e.into(), &p))?;
    let r = f();
    drop(file);
    r
}
