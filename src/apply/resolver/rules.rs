//! git's small rules the resolver follows: which `index` line blob ids count as evidence,
//! when a symlink target leaves the project, the permissions a written file gets, and how
//! hunk offsets are reported.
//!
//! Each is a pure function of its arguments, kept apart from the planner's state so that
//! it can be tested alone against git's behaviour.

use crate::fs::relpath::RelPath;
use crate::git::oid::blob_id;
use crate::patch::model::mode_is_executable;

/// A blob id from an `index` line that can be compared with our SHA-1 ids.
pub(super) fn usable_oid(o: &Option<String>) -> Option<&str> {
    o.as_deref()
        .filter(|o| o.len() >= 4 && o.len() <= 40 && o.bytes().any(|c| c != b'0'))
}

/// A complete blob id on an `index` line (SHA-1 or SHA-256 hex), all zeros included: what git
/// calls a full index line.
pub(super) fn full_oid(o: &Option<String>) -> bool {
    o.as_deref().is_some_and(|o| {
        (o.len() == 40 || o.len() == 64) && o.bytes().all(|c| c.is_ascii_hexdigit())
    })
}

/// Whether `data` has the blob id of an `index` line (`None`: the line gives no usable id).
pub(super) fn oid_matches(o: &Option<String>, data: &[u8]) -> Option<bool> {
    usable_oid(o).map(|o| blob_id(data).starts_with_hex(o))
}

/// Whether a symlink at `link` with `target` would point outside the project (lexically).
pub(super) fn symlink_escapes(link: &RelPath, target: &[u8]) -> bool {
    if target.starts_with(b"/") {
        return true;
    }
    let mut depth = link.as_path().components().count().saturating_sub(1);
    for c in target.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                if depth == 0 {
                    return true;
                }
                depth -= 1;
            }
            _ => depth += 1,
        }
    }
    false
}

/// The permissions of a written file. `new_mode_line`: the new mode comes from an explicit
/// `new mode` line, which git applies even when it equals the old mode (the file's exec bit
/// may differ from both: git warns and sets the new mode).
pub(super) fn perm_for(
    cur: Option<u32>,
    old_mode: Option<u32>,
    new_mode: Option<u32>,
    new_mode_line: bool,
) -> u32 {
    let want_exec = new_mode.map(mode_is_executable);
    match cur {
        None => {
            if want_exec == Some(true) {
                0o755
            } else {
                0o644
            }
        }
        Some(p) => {
            let changes = match (old_mode, new_mode) {
                _ if new_mode_line => true,
                (Some(o), Some(n)) => mode_is_executable(o) != mode_is_executable(n),
                // A `new mode` line without an old mode: git takes the old mode from the
                // file and applies the new one.
                (None, Some(_)) => true,
                _ => false,
            };
            match want_exec {
                Some(true) if changes => p | ((p & 0o444) >> 2),
                Some(false) if changes => p & !0o111,
                _ => p,
            }
        }
    }
}

/// The hunks placed at an offset, for a report's detail (`hunk #2 at offset +3`).
pub(super) fn offsets_note(offsets: &[isize]) -> String {
    let notes: Vec<String> = offsets
        .iter()
        .enumerate()
        .filter(|(_, &o)| o != 0)
        .map(|(k, o)| format!("hunk #{} at offset {o:+}", k + 1))
        .collect();
    notes.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        let r = RelPath::new("a/b/link").unwrap();
        assert!(!symlink_escapes(&r, b"../x"));
        assert!(!symlink_escapes(&r, b"../../x"));
        assert!(symlink_escapes(&r, b"../../../x"));
        assert!(symlink_escapes(&r, b"/etc/passwd"));
        assert!(!symlink_escapes(&r, b"c/../../d"));
    }

    #[test]
    fn perms() {
        assert_eq!(
            perm_for(Some(0o644), Some(0o100644), Some(0o100755), false),
            0o755
        );
        assert_eq!(
            perm_for(Some(0o755), Some(0o100755), Some(0o100644), false),
            0o644
        );
        assert_eq!(
            perm_for(Some(0o600), Some(0o100644), Some(0o100644), false),
            0o600
        );
        assert_eq!(perm_for(None, None, Some(0o100755), false), 0o755);
        // A lone 'new mode': applied to the file's own mode, as git does.
        assert_eq!(perm_for(Some(0o644), None, Some(0o100755), false), 0o755);
        assert_eq!(perm_for(Some(0o755), None, Some(0o100644), false), 0o644);
        assert_eq!(perm_for(Some(0o644), None, None, false), 0o644);
        // An explicit `new mode` equal to the old one still sets the exec bit (git).
        assert_eq!(
            perm_for(Some(0o644), Some(0o100755), Some(0o100755), true),
            0o755
        );
        assert_eq!(
            perm_for(Some(0o755), Some(0o100644), Some(0o100644), true),
            0o644
        );
        assert_eq!(
            perm_for(Some(0o644), Some(0o100755), Some(0o100755), false),
            0o644
        );
    }
}
