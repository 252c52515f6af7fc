//! The fingerprint of an upper layer: the stat data of every entry in it, to prove that
//! nothing was written in an overlay view between two moments without reading any file.
//!
//! Every write through an overlay view lands in its upper layer (copy-up, new entries,
//! whiteouts, xattrs), and changes the ctime (and the inode or size) of an entry there or
//! of its directory; equal fingerprints taken at two moments therefore mean the view did
//! not change in between, provided no entry was changed so close to the first moment that
//! a later write could carry the same coarse timestamp. [`fingerprint`] refuses to give a
//! fingerprint then ([`RACY`]), as git treats its "racily clean" entries.

use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::fs::at::{self, Stat};
use crate::fs::Timestamp;

use super::walk::{walk, Next};
use crate::error::{Error, Result};

/// How close to the moment of a fingerprint an entry's ctime makes it unprovable: far more
/// than the coarsest timestamp granularity of Linux filesystems (a jiffy, at most 10 ms).
pub const RACY: Duration = Duration::from_millis(100);

/// The stat data of every entry of an upper layer (the root's included), sorted by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(Vec<(Vec<u8>, [i64; 8])>);

// The fields' widths differ between architectures: a cast that is a no-op on one is not
// on another.
#[allow(clippy::unnecessary_cast)]
fn stat_key(m: &Stat) -> [i64; 8] {
    [
        m.st_ino as i64,
        i64::from(m.st_mode),
        m.st_size as i64,
        m.st_nlink as i64,
        m.st_mtime as i64,
        m.st_mtime_nsec as i64,
        m.st_ctime as i64,
        m.st_ctime_nsec as i64,
    ]
}

/// Collects a [`Fingerprint`] entry by entry, from stat data a walk of the upper layer takes
/// anyway (see [`super::upper::scan_fingerprinted`]), so that proving a view unchanged costs
/// no walk of its own. Each entry must be stat'ed before anything below or in it is read:
/// a write after its stat then shows in a later fingerprint.
pub struct Recorder {
    /// Entries whose ctime is at or after this are racy.
    limit: Option<Timestamp>,
    out: Vec<(Vec<u8>, [i64; 8])>,
    racy: bool,
}

impl Recorder {
    /// A recorder whose racy window ends now (see [`RACY`]).
    pub fn new() -> Recorder {
        let limit = SystemTime::now().checked_sub(RACY).map(|l| {
            l.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(Timestamp::default(), |d| {
                    Timestamp::new(d.as_secs() as i64, i64::from(d.subsec_nanos()))
                })
        });
        Recorder {
            racy: limit.is_none(),
            limit,
            out: Vec::new(),
        }
    }

    /// Adds the entry `rel` (empty: the layer's root) with its own (not followed) stat data.
    pub fn add(&mut self, rel: Vec<u8>, m: &Stat) {
        let key = stat_key(m);
        if self
            .limit
            .is_none_or(|limit| Timestamp::new(key[6], key[7]) >= limit)
        {
            self.racy = true;
        }
        if !self.racy {
            self.out.push((rel, key));
        }
    }

    /// The fingerprint, or `None` when an entry was racy.
    pub fn finish(mut self) -> Option<Fingerprint> {
        if self.racy {
            return None;
        }
        self.out.sort();
        Some(Fingerprint(self.out))
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

/// The fingerprint of `upper` now, or `None` when an entry's ctime is within [`RACY`] of
/// now (or later): a write right after this call could leave its stat data unchanged.
/// Directories named `.git` are left out, as [`super::upper::scan`] leaves them out.
pub fn fingerprint(upper: &Path) -> Result<Option<Fingerprint>> {
    let mut rec = Recorder::new();
    rec.add(Vec::new(), &root_stat(upper)?);
    walk(upper, &mut |e| {
        if e.is_dir() && e.name == b".git" {
            return Ok(Next::Skip);
        }
        rec.add(e.rel.to_vec(), e.stat);
        Ok(if rec.racy { Next::Stop } else { Next::Descend })
    })?;
    Ok(rec.finish())
}

/// Whether nothing was written in the view of `upper` since `then` was taken: every entry
/// `then` holds still has the same stat data. No directory is listed: an entry added,
/// removed or renamed anywhere changes the times of its directory, which is in `then` (or
/// whose own creation changed the times of its parent, and so on up to the root, always
/// in it), and a write in place changes the entry's ctime. `then` holds no racy entry, so a
/// change after it cannot carry the old timestamp. One `fstatat` per entry, where taking a
/// fingerprint again also opens and lists every directory.
pub fn unchanged(upper: &Path, then: &Fingerprint) -> Result<bool> {
    let fd = at::open_path_dir(upper).map_err(|e| Error::io("open directory", upper, e.into()))?;
    for (rel, key) in &then.0 {
        let now = if rel.is_empty() {
            at::fstat(fd.as_fd())
        } else {
            at::lstat(fd.as_fd(), std::ffi::OsStr::from_bytes(rel))
        };
        match now {
            Ok(m) if stat_key(&m) == *key => {}
            Ok(_) | Err(at::Errno::NOENT) | Err(at::Errno::NOTDIR) => return Ok(false),
            Err(e) => {
                return Err(Error::io(
                    "stat",
                    upper.join(std::ffi::OsStr::from_bytes(rel)),
                    e.into(),
                ))
            }
        }
    }
    Ok(true)
}

/// The layer root's own stat data (not followed).
pub(crate) fn root_stat(upper: &Path) -> Result<Stat> {
    at::lstat(at::CWD, upper).map_err(|e| Error::io("stat", upper, e.into()))
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

    /// `unchanged` says what comparing a new fingerprint says, for every kind of write,
    /// also one made at once (no settling: the stat data move all the same).
    #[test]
    fn unchanged_sees_every_write_without_listing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::write(p.join("a/b/f"), "one").unwrap();
        std::fs::write(p.join("top"), "t").unwrap();
        type Write = fn(&Path);
        let writes: [(&str, Write); 7] = [
            ("rewrite in place", |p| {
                std::fs::write(p.join("a/b/f"), "two").unwrap()
            }),
            ("new file deep", |p| {
                std::fs::write(p.join("a/b/g"), "").unwrap()
            }),
            ("new directory", |p| {
                std::fs::create_dir(p.join("a/c")).unwrap()
            }),
            ("rename", |p| {
                std::fs::rename(p.join("a/b/f"), p.join("a/f")).unwrap()
            }),
            ("mode", |p| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(p.join("top"), std::fs::Permissions::from_mode(0o600))
                    .unwrap()
            }),
            ("hard link", |p| {
                std::fs::hard_link(p.join("top"), p.join("a/l")).unwrap()
            }),
            ("removal", |p| std::fs::remove_file(p.join("top")).unwrap()),
        ];
        for (what, write) in writes {
            settle();
            let then = fingerprint(p).unwrap().expect("settled");
            assert!(unchanged(p, &then).unwrap(), "{what}: untouched");
            write(p);
            assert!(!unchanged(p, &then).unwrap(), "{what}: not seen");
        }
    }
}
