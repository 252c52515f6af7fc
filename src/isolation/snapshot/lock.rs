//! The store's lock: shared while a snapshot is prepared or a sandbox takes one (and
//! records itself among its holders), exclusive while unused snapshots are pruned, so a
//! prune never removes a snapshot a sandbox is starting to use. The exclusive lock is a
//! type, [`Exclusive`]: what may only run under it takes one.

use std::fs::File;
use std::path::{Path, PathBuf};

const LOCK: &str = "lock";

fn open(store: &Path) -> Result<File, crate::error::Error> {
    std::fs::create_dir_all(store)
        .map_err(|e| crate::error::Error::io("create directory", store, e))?;
    let p = store.join(LOCK);
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| crate::error::Error::io("open", &p, e))
}

fn flock(
    f: &File,
    store: &Path,
    op: rustix::fs::FlockOperation,
) -> Result<(), crate::error::Error> {
    rustix::fs::flock(f, op)
        .map_err(|e| crate::error::Error::io("flock", store.join(LOCK), e.into()))
}

/// The store's lock, shared (blocking); made with the store. Released when dropped.
pub fn lock_shared(store: &Path) -> Result<File, crate::error::Error> {
    let f = open(store)?;
    flock(&f, store, rustix::fs::FlockOperation::LockShared)?;
    Ok(f)
}

/// The store held exclusively: no snapshot is being prepared or taken while it lives.
#[derive(Debug)]
pub struct Exclusive {
    store: PathBuf,
    _file: File,
}

impl Exclusive {
    /// The store's directory.
    pub fn store(&self) -> &Path {
        &self.store
    }
}

/// The store's lock, exclusive (blocking); made with the store.
pub fn lock_exclusive(store: &Path) -> Result<Exclusive, crate::error::Error> {
    let f = open(store)?;
    flock(&f, store, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(Exclusive {
        store: store.to_path_buf(),
        _file: f,
    })
}

/// The store's lock, exclusive, if nobody holds it now (`None` also when it cannot be
/// opened): for the best-effort removals that must never wait on a create.
pub fn try_lock_exclusive(store: &Path) -> Option<Exclusive> {
    let f = File::open(store.join(LOCK)).ok()?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(Exclusive {
        store: store.to_path_buf(),
        _file: f,
    })
}
