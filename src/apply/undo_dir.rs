//! An undo record's directory as the write phase leaves it when its apply does not happen:
//! what is removed, so that a caller's directory is never deleted (only the files the
//! library wrote there go). Below both the write phase and recovery, which discard a record
//! that no change followed.

use crate::error::{Error, Result};
use std::path::Path;

/// Removes what an apply that did not happen wrote to its undo record: the whole
/// directory if the library created it, else only the record's own files (the caller's
/// directory stays).
pub(crate) fn discard_record(dir: &Path, created: bool) -> Result<()> {
    let gone = |r: std::io::Result<()>, what: &Path| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io("remove undo record", what, e))
        }
        _ => Ok(()),
    };
    if created {
        return gone(std::fs::remove_dir_all(dir), dir);
    }
    for f in ["record", "record.tmp", "applied"] {
        let p = dir.join(f);
        gone(std::fs::remove_file(&p), &p)?;
    }
    let blobs = dir.join("blobs");
    gone(std::fs::remove_dir_all(&blobs), &blobs)
}
