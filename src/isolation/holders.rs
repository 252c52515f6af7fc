//! Holder records: a directory of small files, one per directory that uses the thing the
//! records sit in (a shared lower layer, a snapshot), each holding that directory's path.
//! The thing is in use while one of those directories exists; so a user that goes away —
//! cleaned up, or removed after a crash — lets it go without telling anyone, and a prune
//! needs nothing but the records to know what it may remove.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::git::oid::{object_id, ObjectKind};

/// Records `holder` in the records directory `dir` (made if missing). Idempotent: a holder
/// has one file, named by a hash of its path.
pub fn record(dir: &Path, holder: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).ctx("create holders directory", dir)?;
    let id = object_id(ObjectKind::Blob, holder.as_os_str().as_bytes());
    let p = dir.join(&id.to_hex()[..16]);
    std::fs::write(&p, holder.as_os_str().as_bytes()).ctx("record holder", &p)
}

/// The holders recorded in `dir`; `None` when `dir` is missing or cannot be read, or a
/// record cannot be: then nobody can say who holds it.
pub fn list(dir: &Path) -> Option<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).ok()?;
    rd.map(|e| {
        let b = std::fs::read(e.ok()?.path()).ok()?;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(&b)))
    })
    .collect()
}

/// Whether a holder recorded in `dir` still exists. A records directory that is missing
/// reads as held when `missing_holds` (its users were never recorded), and one that cannot
/// be read always does: a thing is kept, never guessed unused.
pub fn held(dir: &Path, missing_holds: bool) -> bool {
    if !dir.exists() {
        return missing_holds;
    }
    match list(dir) {
        Some(holders) => holders.iter().any(|h| h.exists()),
        None => true,
    }
}
