//! The fingerprint of an upper layer: the stat data of every entry in it, to prove that
//! nothing was written in an overlay view between two moments without reading any file.
//!
//! Every write through an overlay view lands in its upper layer (copy-up, new entries,
//! whiteouts, xattrs), and changes the ctime (and the inode or size) of an entry there or
//! of its directory; equal fingerprints taken at two moments therefore mean the view did
//! not change in between, provided no entry was changed so close to the first moment that
//! a later write could carry the same coarse timestamp. [`fingerprint`] refuses to give a
//! fingerprint then ([`RACY`]), as git treats its "racily clean" entries.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

/// How close to the moment of a fingerprint an entry's ctime makes it unprovable: far more
/// than the coarsest timestamp granularity of Linux filesystems (a jiffy, at most 10 ms).
pub const RACY: Duration = Duration::from_millis(100);

/// The stat data of every entry of an upper layer (the root's included), sorted by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(Vec<(Vec<u8>, [i64; 8])>);

fn stat_key(m: &std::fs::Metadata) -> [i64; 8] {
    [
        m.ino() as i64,
        m.mode() as i64,
        m.size() as i64,
        m.nlink() as i64,
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ]
}

/// The fingerprint of `upper` now, or `None` when an entry's ctime is within [`RACY`] of
/// now (or later): a write right after this call could leave its stat data unchanged.
/// Directories named `.git` are left out, as [`super::upper::scan`] leaves them out.
pub fn fingerprint(upper: &Path) -> Result<Option<Fingerprint>> {
    let now = SystemTime::now();
    let Some(limit) = now.checked_sub(RACY) else {
        return Ok(None);
    };
    let limit = limit
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or((0, 0), |d| {
            (d.as_secs() as i64, i64::from(d.subsec_nanos()))
        });
    let racy = |k: &[i64; 8]| (k[6], k[7]) >= limit;
    let root = std::fs::symlink_metadata(upper).map_err(|e| Error::io("stat", upper, e))?;
    let key = stat_key(&root);
    if racy(&key) {
        return Ok(None);
    }
    let mut out = vec![(Vec::new(), key)];
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(rel_dir) = stack.pop() {
        let abs = upper.join(std::ffi::OsStr::from_bytes(&rel_dir));
        let rd = std::fs::read_dir(&abs).map_err(|e| Error::io("read directory", &abs, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| Error::io("read directory", &abs, e))?;
            let name = entry.file_name();
            let rel = super::upper::join_rel(&rel_dir, name.as_bytes());
            // Not followed: a symlink's own stat data.
            let m = entry
                .metadata()
                .map_err(|e| Error::io("stat", entry.path(), e))?;
            if m.is_dir() && name.as_bytes() == b".git" {
                continue;
            }
            let key = stat_key(&m);
            if racy(&key) {
                return Ok(None);
            }
            if m.is_dir() {
                stack.push(rel.clone());
            }
            out.push((rel, key));
        }
    }
    out.sort();
    Ok(Some(Fingerprint(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits out the racy window (a ctime cannot be set back; it is always now).
    fn settle() {
        std::thread::sleep(RACY + Duration::from_millis(20));
    }

    #[test]
    fn equal_when_untouched_and_different_after_any_write() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/f"), "one").unwrap();
        // Fresh entries are racy: no fingerprint.
        assert_eq!(fingerprint(d.path()).unwrap(), None);
        settle();
        let a = fingerprint(d.path()).unwrap().expect("settled");
        assert_eq!(fingerprint(d.path()).unwrap(), Some(a.clone()));
        // A same-size rewrite in place: the ctime moves (and the entry is racy right after).
        std::fs::write(d.path().join("sub/f"), "two").unwrap();
        settle();
        let b = fingerprint(d.path()).unwrap().expect("settled");
        assert_ne!(a, b);
        // A new entry, then its removal (the directory's times move).
        std::fs::write(d.path().join("g"), "").unwrap();
        std::fs::remove_file(d.path().join("g")).unwrap();
        settle();
        assert_ne!(fingerprint(d.path()).unwrap().expect("settled"), b);
    }
}
