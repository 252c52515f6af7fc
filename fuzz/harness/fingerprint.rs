//! Fingerprints of directories: the exact one (modes, contents, mtimes) that proves nothing
//! changed, and the coarser view that compares patchbox's result with git's.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::patches::replace_all;
use super::OUTSIDE;

/// Per path: full mode, contents (a symlink's target), mtime. The root included.
pub type Exact = BTreeMap<Vec<u8>, (u32, Vec<u8>, i64, i64)>;

/// The exact fingerprint of everything under `root`, skipping the entries `skip` names (and
/// what is under them).
pub fn exact(root: &Path, skip: Option<&Path>) -> Exact {
    let mut out = BTreeMap::new();
    let walk = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| skip.is_none_or(|s| e.path() != s));
    for e in walk {
        let Ok(e) = e else { continue };
        let rel = e.path().strip_prefix(root).unwrap();
        let Ok(m) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        let content = if m.file_type().is_symlink() {
            fs::read_link(e.path())
                .map(|t| t.as_os_str().as_bytes().to_vec())
                .unwrap_or_default()
        } else if m.is_file() {
            fs::read(e.path()).unwrap_or_default()
        } else {
            Vec::new()
        };
        out.insert(
            rel.as_os_str().as_bytes().to_vec(),
            (m.mode(), content, m.mtime(), m.mtime_nsec()),
        );
    }
    out
}

/// What a patch can change, per path (directories included): type, exec bit, contents.
pub type View = BTreeMap<Vec<u8>, (char, bool, Vec<u8>)>;

/// The [`View`] of `root`; `outside` in symlink targets and file contents becomes `@OUTSIDE@`.
pub fn view(root: &Path, outside: &Path) -> View {
    exact(root, None)
        .into_iter()
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, (mode, content, _, _))| {
            let kind = match mode & 0o170000 {
                0o120000 => 'l',
                0o040000 => 'd',
                0o100000 => 'f',
                _ => '?',
            };
            let exec = kind == 'f' && mode & 0o100 != 0;
            // In file contents too: a patch's `@OUTSIDE@` line (a symlink's target written
            // as a regular file) is each copy's own outside directory.
            let content = replace_all(&content, outside.as_os_str().as_bytes(), OUTSIDE.as_bytes());
            (k, (kind, exec, content))
        })
        .collect()
}

/// The first difference between two views, as a short class word and the path.
pub(super) fn view_diff(ours: &View, theirs: &View) -> (String, String) {
    let keys: BTreeSet<&Vec<u8>> = ours.keys().chain(theirs.keys()).collect();
    for k in keys {
        let what = match (ours.get(k), theirs.get(k)) {
            (Some(_), None) => "only in patchbox's result",
            (None, Some(_)) => "only in git's result",
            (Some(a), Some(b)) if a.0 != b.0 => "type differs",
            (Some(a), Some(b)) if a.1 != b.1 => "exec bit differs",
            (Some(a), Some(b)) if a.2 != b.2 => "content differs",
            _ => continue,
        };
        return (what.to_string(), String::from_utf8_lossy(k).into_owned());
    }
    ("equal".into(), String::new())
}
