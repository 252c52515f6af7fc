//! The names in a directory, read through a descriptor.

use std::ffi::CString;
use std::os::fd::OwnedFd;

use super::AtResult;

/// The names in the directory `fd` (which the listing consumes; pass a duplicate to keep
/// using it), `.` and `..` left out: `getdents` into one buffer, no `stat` per name.
pub(crate) fn names(fd: OwnedFd) -> AtResult<Vec<CString>> {
    let mut dir = rustix::fs::Dir::new(fd)?;
    let mut out = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name();
        let b = name.to_bytes();
        if b != b"." && b != b".." {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}
