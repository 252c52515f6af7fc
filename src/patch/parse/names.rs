//! File names in patch headers: `-p` stripping, C-quoted and TAB-terminated names, the
//! names on a `diff --git` line, and the timestamps of traditional diffs.
//!
//! Every name ends as a [`RelPath`] through [`Parser::path_from`], which refuses what git's
//! `verify_path` refuses (a `.` component, a trailing `/`, besides `RelPath`'s own rules), so
//! a hostile name never leaves the parser.

use std::os::unix::ffi::OsStrExt;

use super::Parser;
use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::git::quote::unquote_c_style;

/// Removes everything up to the `n`-th slash, like git's `-p<n>`: every slash counts, so
/// `b//etc/passwd` keeps its second slash and stays absolute (git refuses it as an invalid
/// path; it never becomes `etc/passwd`).
pub(super) fn strip_components(name: &[u8], n: usize) -> Option<&[u8]> {
    let mut s = name;
    for _ in 0..n {
        let idx = s.iter().position(|&c| c == b'/')?;
        s = &s[idx + 1..];
    }
    Some(s)
}

/// Removes `n` leading components from a `diff --git` line's name as git's
/// `skip_tree_prefix` does: like [`strip_components`], but a name whose stripping slash is
/// its first character (`/abs` with `-p1`) or a leading `/` with `-p0` has no prefix to
/// skip and gives no name.
pub(super) fn skip_tree_prefix(name: &[u8], n: usize) -> Option<&[u8]> {
    if n == 0 {
        return (name.first() != Some(&b'/')).then_some(name);
    }
    let i = name
        .iter()
        .enumerate()
        .filter(|(_, &c)| c == b'/')
        .nth(n - 1)
        .map(|(i, _)| i)?;
    (i != 0).then(|| &name[i + 1..])
}

/// A file name as read from a header: `None` is `/dev/null`.
pub(super) type HeaderName = Option<Vec<u8>>;

impl Parser<'_> {
    /// Strips `n` components and validates the result as a [`RelPath`].
    pub(super) fn path_from(&self, raw: &[u8], n: usize, line_idx: usize) -> Result<RelPath> {
        if raw.contains(&0) {
            return Err(Self::err(line_idx, "file name contains a NUL byte"));
        }
        let stripped = strip_components(raw, n).ok_or_else(|| {
            Self::err(
                line_idx,
                format!(
                    "file name {:?} has fewer than {n} leading components to strip",
                    String::from_utf8_lossy(raw)
                ),
            )
        })?;
        // What git's verify_path refuses beyond '..' and absolute names (RelPath's rules):
        // a '.' component and a name ending with '/' (a directory).
        let refuse = |reason| Error::Containment {
            path: std::path::PathBuf::from(std::ffi::OsStr::from_bytes(stripped)),
            base: std::path::PathBuf::from("."),
            reason,
        };
        if stripped.split(|&c| c == b'/').any(|c| c == b".") {
            return Err(refuse("path has a '.' component"));
        }
        if stripped.len() > 1 && stripped.ends_with(b"/") {
            return Err(refuse("path ends with '/'"));
        }
        match RelPath::from_bytes(stripped) {
            Ok(p) => Ok(p),
            Err(Error::Containment {
                reason: "path is empty",
                ..
            }) => Err(Self::err(line_idx, "empty file name")),
            Err(e) => Err(e),
        }
    }

    /// Reads a name from a `---`/`+++`/`rename from` value: C-quoted, or up to a TAB (or the
    /// end of the line). `/dev/null` gives `None`. `traditional` also strips a trailing
    /// timestamp written without a TAB.
    pub(super) fn header_name(
        value: &[u8],
        line_idx: usize,
        traditional: bool,
    ) -> Result<(HeaderName, &[u8])> {
        if value.first() == Some(&b'"') {
            let (name, used) = unquote_c_style(value)
                .ok_or_else(|| Self::err(line_idx, "bad quoted file name"))?;
            return Ok((Some(name), &value[used..]));
        }
        let (name, rest) = match value.iter().position(|&c| c == b'\t') {
            Some(t) => (&value[..t], &value[t + 1..]),
            None if traditional => match timestamp_suffix(value) {
                Some(k) => (&value[..k], &value[k..]),
                None => (value, &value[value.len()..]),
            },
            None => (value, &value[value.len()..]),
        };
        if name == b"/dev/null" {
            Ok((None, rest))
        } else if name.is_empty() {
            Err(Self::err(line_idx, "missing file name"))
        } else {
            Ok((Some(name.to_vec()), rest))
        }
    }

    /// Names from the `diff --git` line, stripped, when they can be told apart.
    ///
    /// As in git (`git_header_name`), the two names must be the same after stripping, quoted
    /// or not; otherwise the line gives no name (a rename's names come from its `rename`
    /// lines, other sections' from `---`/`+++`). `rest` keeps a CR before the newline: git
    /// reads it as part of an unquoted second name (so a CRLF-converted line names nothing),
    /// and ignores it after a quoted one.
    pub(super) fn git_line_names(&self, rest: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        // git reads the line as a C string: a NUL ends it before its newline, and a line
        // without a newline names nothing (git_header_name).
        if rest.contains(&0) {
            return None;
        }
        let strip = |n: &[u8]| skip_tree_prefix(n, self.strip).map(<[u8]>::to_vec);
        let same = |a: Vec<u8>, b: Vec<u8>| (a == b && !a.is_empty()).then_some((a, b));
        if rest.first() == Some(&b'"') {
            let (a, used) = unquote_c_style(rest)?;
            let r = rest[used..].strip_prefix(b" ")?;
            let b = if r.first() == Some(&b'"') {
                let (b, used2) = unquote_c_style(r)?;
                if !matches!(&r[used2..], b"" | b"\r") {
                    return None;
                }
                b
            } else {
                r.to_vec()
            };
            return same(strip(&a)?, strip(&b)?);
        }
        // An unquoted first name: git takes the first `"` on the line, wherever it is, as
        // the start of a quoted second name (so a `"` inside the first name leaves the line
        // without names: "lacks filename information").
        if let Some(dq) = rest.iter().position(|&c| c == b'"') {
            let q = dq.checked_sub(1).filter(|&q| rest[q] == b' ')?;
            let (b, used) = unquote_c_style(&rest[q + 1..])?;
            if q + 1 + used != rest.len() {
                return None;
            }
            return same(strip(&rest[..q])?, strip(&b)?);
        }
        // Unquoted: both names are the same after stripping (git's rule for headers without
        // rename information); try each space as the separator.
        for (sp, _) in rest.iter().enumerate().filter(|(_, &c)| c == b' ') {
            let a = strip(&rest[..sp]);
            let b = strip(&rest[sp + 1..]);
            if let (Some(a), Some(b)) = (a, b) {
                if a == b && !a.is_empty() {
                    return Some((a, b));
                }
            }
        }
        None
    }

    /// A name on a `rename from`/`copy to` line: quoted, or the rest of the line.
    pub(super) fn plain_name(&self, v: &[u8], line_idx: usize) -> Result<Vec<u8>> {
        if v.first() == Some(&b'"') {
            let (name, used) =
                unquote_c_style(v).ok_or_else(|| Self::err(line_idx, "bad quoted file name"))?;
            if !v[used..].is_empty() {
                return Err(Self::err(line_idx, "text after the quoted file name"));
            }
            Ok(name)
        } else if v.is_empty() {
            Err(Self::err(line_idx, "missing file name"))
        } else {
            Ok(v.to_vec())
        }
    }
}

/// Whether a traditional header's timestamp is the epoch (used by `diff -N` for absent
/// files), in any time zone: `1970-01-01 00:00:00 +0000`, `1970-01-01 01:00:00.000 +0100`,
/// `1969-12-31 19:00:00 -0500`, as git checks it.
pub(super) fn is_epoch(rest: &[u8]) -> bool {
    let s = String::from_utf8_lossy(rest);
    let s = s.trim();
    let mut parts = s.split_whitespace();
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    let zone = parts.next().unwrap_or("+0000");
    let day_minutes = match date {
        "1970-01-01" => 0i64,
        "1969-12-31" => -1440,
        _ => return false,
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    if !frac.bytes().all(|c| c == b'0') {
        return false;
    }
    let f: Vec<i64> = hms.split(':').filter_map(|x| x.parse().ok()).collect();
    let [h, m, sec] = f[..] else {
        return false;
    };
    if sec != 0 {
        return false;
    }
    let z = zone.as_bytes();
    if z.len() != 5 || !(z[0] == b'+' || z[0] == b'-') {
        return false;
    }
    let Ok(zv) = zone[1..].parse::<i64>() else {
        return false;
    };
    let zone_minutes = (zv / 100 * 60 + zv % 100) * if z[0] == b'-' { -1 } else { 1 };
    day_minutes + h * 60 + m == zone_minutes
}

/// Finds a ` YYYY-MM-DD HH:MM:SS…` timestamp at the end of an unquoted traditional header value
/// written without a TAB; returns the index where the name ends.
pub(super) fn timestamp_suffix(v: &[u8]) -> Option<usize> {
    // Look for " dddd-dd-dd dd:dd:dd" and require it to run to the end of the line with only
    // fraction/zone characters after it.
    let pat_ok = |w: &[u8]| {
        w.len() == 20
            && w[0] == b' '
            && w[1..5].iter().all(u8::is_ascii_digit)
            && w[5] == b'-'
            && w[6..8].iter().all(u8::is_ascii_digit)
            && w[8] == b'-'
            && w[9..11].iter().all(u8::is_ascii_digit)
            && w[11] == b' '
            && w[12..14].iter().all(u8::is_ascii_digit)
            && w[14] == b':'
            && w[15..17].iter().all(u8::is_ascii_digit)
            && w[17] == b':'
            && w[18..20].iter().all(u8::is_ascii_digit)
    };
    if v.len() < 21 {
        return None;
    }
    (0..=v.len() - 20).rev().find(|&k| {
        k > 0
            && pat_ok(&v[k..k + 20])
            && v[k + 20..]
                .iter()
                .all(|c| c.is_ascii_digit() || b" .+-".contains(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip() {
        assert_eq!(strip_components(b"a/b/c", 1), Some(&b"b/c"[..]));
        // This used to give "b": git counts every slash, so "a//b" loses "a/" and stays
        // absolute ("/b", refused as an invalid path), and "-p2" gives "b".
        assert_eq!(strip_components(b"a//b", 1), Some(&b"/b"[..]));
        assert_eq!(strip_components(b"a//b", 2), Some(&b"b"[..]));
        assert_eq!(strip_components(b"/abs/x", 1), Some(&b"abs/x"[..]));
        assert_eq!(strip_components(b"abc", 1), None);
        assert_eq!(strip_components(b"abc", 0), Some(&b"abc"[..]));
        // git's skip_tree_prefix for the `diff --git` line: a leading '/' is no prefix.
        assert_eq!(skip_tree_prefix(b"a/b/c", 1), Some(&b"b/c"[..]));
        assert_eq!(skip_tree_prefix(b"/abs", 1), None);
        assert_eq!(skip_tree_prefix(b"a//b", 2), Some(&b"b"[..]));
        assert_eq!(skip_tree_prefix(b"abc", 1), None);
        assert_eq!(skip_tree_prefix(b"/abs", 0), None);
        assert_eq!(skip_tree_prefix(b"abc", 0), Some(&b"abc"[..]));
    }

    #[test]
    fn timestamps() {
        assert_eq!(
            timestamp_suffix(b"foo bar 2024-01-02 03:04:05.123456789 +0100"),
            Some(7)
        );
        assert_eq!(timestamp_suffix(b"foo"), None);
        assert!(is_epoch(b"1970-01-01 00:00:00.000000000 +0000"));
        assert!(is_epoch(b"1970-01-01 01:00:00.000000000 +0100"));
        assert!(is_epoch(b"1969-12-31 19:00:00 -0500"));
        assert!(is_epoch(b"1970-01-01 05:30:00 +0530"));
        assert!(is_epoch(b"1970-01-01 00:00:00"));
        assert!(!is_epoch(b"1970-01-01 01:00:00.000000000 +0000"));
        assert!(!is_epoch(b"1970-01-01 00:00:01 +0000"));
        assert!(!is_epoch(b"2024-01-01 00:00:00 +0000"));
        assert!(!is_epoch(b"garbage"));
    }
}
