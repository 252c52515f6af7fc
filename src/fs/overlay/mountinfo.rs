//! Reading the mount table: whether something is mounted on a directory.
//!
//! `/proc/self/mountinfo` names mount points with octal escapes (`\040` for a space); the
//! comparison is on the unescaped bytes of the resolved path.
//!
//! ```
//! use patchbox::fs::overlay::mountinfo::unescape;
//! assert_eq!(unescape(br"/a\040b"), b"/a b".to_vec());
//! ```

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};

/// Whether something is mounted on `mnt` (a resolved path), by `/proc/self/mountinfo`.
pub fn is_mounted(mnt: &Path) -> Result<bool> {
    let info = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| Error::io("read", "/proc/self/mountinfo", e))?;
    let want = mnt.as_os_str().as_bytes();
    Ok(info
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .any(|field| unescape(field) == want))
}

/// The mount points strictly below `dir` (a resolved path), deepest first: what to unmount
/// before `dir` is removed.
pub fn mounts_below(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let info = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| Error::io("read", "/proc/self/mountinfo", e))?;
    let mut prefix = dir.as_os_str().as_bytes().to_vec();
    prefix.push(b'/');
    let mut out: Vec<std::path::PathBuf> = info
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .map(unescape)
        .filter(|p| p.starts_with(&prefix))
        .map(|p| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&p)))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    out.dedup();
    Ok(out)
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
pub fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\' && i + 3 < field.len() {
            let oct = &field[i + 1..i + 4];
            if oct.iter().all(|b| (b'0'..=b'7').contains(b)) {
                out.push((oct[0] - b'0') * 64 + (oct[1] - b'0') * 8 + (oct[2] - b'0'));
                i += 4;
                continue;
            }
        }
        out.push(field[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(unescape(br"/a\040b\134c"), b"/a b\\c".to_vec());
        assert_eq!(unescape(br"/a\04"), br"/a\04".to_vec());
    }
}
