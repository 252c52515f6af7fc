//! Names other file systems read as `.git` (or, for symlinks, `.gitmodules`): the rules of
//! git's `verify_path` (read-cache.c), `is_ntfs_dotgit`/`is_ntfs_dot_generic` (path.c) and
//! `is_hfs_dotgit` (utf8.c).
//!
//! A project may be shared with, copied to or checked out on Windows or macOS, where
//! `.git.`, `.git ` (trailing dots and spaces), `.git::$INDEX_ALLOCATION` (an NTFS stream),
//! `GIT~1` (an 8.3 short name) or `.g\u{200c}it` (HFS+ ignores some code points) all name
//! the `.git` directory. git refuses such paths in patches (`protect_ntfs` is on by default
//! everywhere; `protect_hfs` only on macOS); the project chokepoint refuses them all, on any
//! system, and each function here says which rule a name breaks.

/// Which rule makes `component` (one path component, without `/`) a name for `.git`, or
/// `None` if it is not one. A backslash counts as a separator (as on Windows, and as git's
/// `verify_path` treats it when it protects NTFS).
pub(crate) fn dotgit_alias(component: &[u8]) -> Option<&'static str> {
    // Every alias starts with '.', 'g' or 'G', has a backslash, or has a non-ASCII byte
    // (HFS+ ignorable code points): most names are none of these.
    if !matches!(component.first(), Some(b'.' | b'g' | b'G'))
        && component.iter().all(|&c| c.is_ascii() && c != b'\\')
    {
        return None;
    }
    if component.eq_ignore_ascii_case(b".git") {
        return Some("path has a '.git' component");
    }
    if ntfs_dotgit(component) {
        return Some(
            "path has a component NTFS reads as '.git' (trailing dots or spaces, a ':' stream, or the short name GIT~1)",
        );
    }
    let mut rest = component;
    while let Some(i) = rest.iter().position(|&c| c == b'\\') {
        rest = &rest[i + 1..];
        if ntfs_dotgit(rest) {
            return Some(
                "path has a '.git' component after a backslash (a directory separator on Windows)",
            );
        }
    }
    if hfs_dot(component, b"git") {
        return Some(
            "path has a component HFS+ reads as '.git' (with code points HFS+ ignores, like U+200C)",
        );
    }
    None
}

/// For a symlink: which rule makes `component` a name for `.gitmodules` (git refuses
/// symlinks there, since git reads that file), or `None`. `last` says whether it is the last
/// component (the NTFS rules apply only there, as in git).
pub(crate) fn dotgitmodules_alias(component: &[u8], last: bool) -> Option<&'static str> {
    if component.eq_ignore_ascii_case(b".gitmodules") {
        return Some("a symlink named '.gitmodules'");
    }
    if last && ntfs_dot_generic(component, b"gitmodules", b"gi7eba") {
        return Some("a symlink with a name NTFS reads as '.gitmodules'");
    }
    if hfs_dot(component, b"gitmodules") {
        return Some("a symlink with a name HFS+ reads as '.gitmodules'");
    }
    None
}

/// git's `is_ntfs_dotgit` for a name starting at a component: `.git` or `git~1` (any case)
/// followed only by dots and spaces up to the end, a separator or a `:`.
fn ntfs_dotgit(name: &[u8]) -> bool {
    let rest = if name.len() >= 4 && name[0] == b'.' && name[1..4].eq_ignore_ascii_case(b"git") {
        &name[4..]
    } else if name.len() >= 5 && name[..5].eq_ignore_ascii_case(b"git~1") {
        &name[5..]
    } else {
        return false;
    };
    for &c in rest {
        if c == b'\\' || c == b'/' || c == b':' {
            return true;
        }
        if c != b'.' && c != b' ' {
            return false;
        }
    }
    true
}

/// git's `is_ntfs_dot_generic`: `.<name>`, its 8.3 short name (`<first 6>~1`..`~4`) or the
/// fall-back short name (`<prefix>~<digits>`), followed only by dots and spaces (or a
/// `:` stream).
fn ntfs_dot_generic(name: &[u8], dotgit_name: &[u8], short_prefix: &[u8; 6]) -> bool {
    let at = |i: usize| name.get(i).copied().unwrap_or(0);
    let only_spaces_and_periods = |mut i: usize| loop {
        let c = at(i);
        i += 1;
        if c == 0 || c == b':' {
            return true;
        }
        if c != b' ' && c != b'.' {
            return false;
        }
    };
    let len = dotgit_name.len();
    if at(0) == b'.' && name.len() > len && name[1..=len].eq_ignore_ascii_case(dotgit_name) {
        return only_spaces_and_periods(len + 1);
    }
    if name.len() >= 8
        && name[..6].eq_ignore_ascii_case(&dotgit_name[..6.min(len)])
        && name[6] == b'~'
        && (b'1'..=b'4').contains(&name[7])
    {
        return only_spaces_and_periods(8);
    }
    let mut saw_tilde = false;
    let mut i = 0;
    while i < 8 {
        let c = at(i);
        if c == 0 {
            return false;
        } else if saw_tilde {
            if !c.is_ascii_digit() {
                return false;
            }
        } else if c == b'~' {
            i += 1;
            if !(b'1'..=b'9').contains(&at(i)) {
                return false;
            }
            saw_tilde = true;
        } else if i >= 6 || c & 0x80 != 0 || c.to_ascii_lowercase() != short_prefix[i] {
            return false;
        }
        i += 1;
    }
    only_spaces_and_periods(8)
}

/// Code points HFS+ ignores in names (git's `next_hfs_char`).
fn hfs_ignored(c: char) -> bool {
    matches!(
        c,
        '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}'
    )
}

/// git's `is_hfs_dot_generic`: `.<needle>` once the ignored code points are dropped,
/// ASCII letters in any case. Malformed UTF-8 after the needle counts as the end, as in git.
fn hfs_dot(component: &[u8], needle: &[u8]) -> bool {
    // Characters, `None` for malformed UTF-8 (where git's reader stops).
    let mut chars = component
        .utf8_chunks()
        .flat_map(|ch| {
            ch.valid()
                .chars()
                .map(Some)
                .chain((!ch.invalid().is_empty()).then_some(None))
        })
        .filter(|c| !c.is_some_and(hfs_ignored));
    if chars.next() != Some(Some('.')) {
        return false;
    }
    for &n in needle {
        match chars.next() {
            Some(Some(c)) if c.is_ascii() && c.to_ascii_lowercase() == n as char => {}
            _ => return false,
        }
    }
    matches!(chars.next(), None | Some(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_aliases() {
        for bad in [
            &b".git"[..],
            b".GIT",
            b".Git",
            b".git.",
            b".git ",
            b".git. .",
            b".git::$INDEX_ALLOCATION",
            b".git:stream",
            b"GIT~1",
            b"git~1",
            b"git~1. ",
            b"x\\.git",
            b"a\\GIT~1\\b",
            b".g\xe2\x80\x8cit",
            b"\xe2\x80\x8e.GIT\xef\xbb\xbf",
            b".git\xff",
        ] {
            assert!(
                dotgit_alias(bad).is_some(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        for ok in [
            &b".gitignore"[..],
            b".github",
            b"git",
            b".git-x",
            b".gi",
            b"git~2",
            b"GIT~10",
            b"x.git",
            b"x\\.gitx",
            b".g\xe2\x80\x8cix",
            b"\xff.git",
        ] {
            assert!(
                dotgit_alias(ok).is_none(),
                "{:?}",
                String::from_utf8_lossy(ok)
            );
        }
    }

    #[test]
    fn gitmodules_aliases() {
        for bad in [
            &b".gitmodules"[..],
            b".GITMODULES",
            b".gitmodules .",
            b"GITMOD~1",
            b"gitmod~4",
            b"gi7eba~1",
            b"gi7eb~12",
            b".gitmodules\xe2\x80\x8c",
        ] {
            assert!(
                dotgitmodules_alias(bad, true).is_some(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(dotgitmodules_alias(b"GITMOD~1", false).is_none());
        for ok in [
            &b".gitmodulesx"[..],
            b"gitmodules",
            b"GITMOD~5",
            b"gi7eba~0",
        ] {
            assert!(
                dotgitmodules_alias(ok, true).is_none(),
                "{:?}",
                String::from_utf8_lossy(ok)
            );
        }
    }
}
