//! Text hunks: `@@ -a,b +c,d @@` headers and the context, removed and added lines they
//! count, with `\\ No newline at end of file` markers.
//!
//! A hunk is read exactly as long as its header says; input that ends inside it, a line
//! that does not fit the counts, or a hunk without any change is a corrupt (cut) patch, as
//! in git.

use super::{trim_eol, Parser};
use crate::error::Result;
use crate::patch::model::{Hunk, HunkLine, LineKind};

/// The `\ No newline at end of file` marker as git and GNU diff write it in English.
const NO_NEWLINE_MARKER: &[u8] = b"\\ No newline at end of file";

impl Parser<'_> {
    /// Parses consecutive hunks starting at `i` (which must be a `@@ -` line).
    pub(super) fn hunks(&self, mut i: usize) -> Result<(Vec<Hunk>, usize)> {
        let n = self.lines.len();
        let mut out = Vec::new();
        while i < n && self.lines[i].starts_with(b"@@ -") {
            let header_idx = i;
            if !self.lines[i].ends_with(b"\n") {
                return Err(Self::err(
                    i,
                    "the input ends inside a hunk header (truncated patch)",
                ));
            }
            let (old_start, old_len, new_start, new_len, section) =
                parse_hunk_header(trim_eol(self.lines[i]))
                    .ok_or_else(|| Self::err(i, "bad hunk header"))?;
            i += 1;
            let mut lines: Vec<HunkLine> = Vec::new();
            let (mut old_rem, mut new_rem) = (old_len, new_len);
            while old_rem > 0 || new_rem > 0 {
                if i >= n {
                    return Err(Self::err(
                        n,
                        format!(
                            "hunk at line {} is truncated ({} old and {} new lines missing)",
                            header_idx + 1,
                            old_rem,
                            new_rem
                        ),
                    ));
                }
                let l = self.lines[i];
                // Only the input's last line can lack its newline: a hunk line cut off there
                // is a truncated patch (git: "corrupt patch"), not a line to complete.
                if !l.ends_with(b"\n") && l.first() != Some(&b'\\') {
                    return Err(Self::err(
                        i,
                        format!(
                            "the input ends inside a line of the hunk at line {} (truncated patch)",
                            header_idx + 1
                        ),
                    ));
                }
                let text = |l: &[u8]| l.to_vec();
                match l.first() {
                    Some(b' ') | Some(b'\n') if old_rem > 0 && new_rem > 0 => {
                        let t = if l[0] == b'\n' {
                            b"\n".to_vec()
                        } else {
                            text(&l[1..])
                        };
                        lines.push(HunkLine {
                            kind: LineKind::Context,
                            text: t,
                        });
                        old_rem -= 1;
                        new_rem -= 1;
                    }
                    Some(b'-') if old_rem > 0 => {
                        lines.push(HunkLine {
                            kind: LineKind::Delete,
                            text: text(&l[1..]),
                        });
                        old_rem -= 1;
                    }
                    Some(b'+') if new_rem > 0 => {
                        lines.push(HunkLine {
                            kind: LineKind::Insert,
                            text: text(&l[1..]),
                        });
                        new_rem -= 1;
                    }
                    Some(b'\\') => {
                        self.no_newline(&mut lines, i)?;
                    }
                    Some(b' ') | Some(b'\n') | Some(b'-') | Some(b'+') => {
                        return Err(Self::err(
                            i,
                            format!(
                                "hunk at line {} has more lines than its header says",
                                header_idx + 1
                            ),
                        ))
                    }
                    _ => {
                        return Err(Self::err(
                            i,
                            format!(
                            "unexpected line in hunk at line {} ({} old and {} new lines missing)",
                            header_idx + 1,
                            old_rem,
                            new_rem
                        ),
                        ))
                    }
                }
                i += 1;
            }
            if i < n && self.lines[i].starts_with(b"\\") {
                self.no_newline(&mut lines, i)?;
                i += 1;
            }
            // git: a hunk that neither removes nor adds a line is a corrupt patch
            // (parse_fragment), e.g. `@@ -0,0 +0,0 @@` left by a cut.
            if lines.iter().all(|l| l.kind == LineKind::Context) {
                return Err(Self::err(
                    header_idx,
                    "corrupt patch: hunk without any removed or added line",
                ));
            }
            out.push(Hunk {
                old_start,
                old_len,
                new_start,
                new_len,
                section,
                lines,
                line: header_idx + 1,
            });
        }
        Ok((out, i))
    }

    /// Takes the `\\ No newline at end of file` line at `i` off the last hunk line.
    ///
    /// Like git, any `\\ ` line of 12 bytes or more is the marker (diff tools translate it);
    /// unlike git, which leaves a shorter one in place as junk (keeping the newline), a
    /// shorter one or one the input ends inside is an error: the patch was cut off.
    fn no_newline(&self, lines: &mut [HunkLine], i: usize) -> Result<()> {
        let l = self.lines.get(i).copied().unwrap_or_default();
        if !l.ends_with(b"\n")
            && l != NO_NEWLINE_MARKER
            && (NO_NEWLINE_MARKER.starts_with(l) || l.len() < 12)
        {
            return Err(Self::err(
                i,
                "the input ends inside a '\\ No newline at end of file' line (truncated patch)",
            ));
        }
        if !l.starts_with(b"\\ ") || l.len() < 12 {
            return Err(Self::err(
                i,
                "malformed '\\ No newline at end of file' line (cut off?)",
            ));
        }
        match lines.last_mut() {
            Some(last) if last.text.ends_with(b"\n") => {
                last.text.pop();
                Ok(())
            }
            _ => Err(Self::err(
                i,
                "'\\ No newline' marker without a line before it",
            )),
        }
    }
}

/// `@@ -a[,b] +c[,d] @@[ section]`
fn parse_hunk_header(l: &[u8]) -> Option<(usize, usize, usize, usize, Vec<u8>)> {
    let rest = l.strip_prefix(b"@@ -")?;
    let (old, rest) = split_range(rest)?;
    let rest = rest.strip_prefix(b" +")?;
    let (new, rest) = split_range(rest)?;
    let rest = rest.strip_prefix(b" @@")?;
    let section = rest.strip_prefix(b" ").unwrap_or(rest).to_vec();
    Some((old.0, old.1, new.0, new.1, section))
}

fn split_range(s: &[u8]) -> Option<((usize, usize), &[u8])> {
    fn num(s: &[u8]) -> Option<(usize, &[u8])> {
        let end = s
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(s.len());
        if end == 0 || end > 12 {
            return None;
        }
        let v = std::str::from_utf8(&s[..end]).ok()?.parse().ok()?;
        Some((v, &s[end..]))
    }
    let (start, rest) = num(s)?;
    if let Some(r) = rest.strip_prefix(b",") {
        let (len, rest) = num(r)?;
        Some(((start, len), rest))
    } else {
        Some(((start, 1), rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunk_header() {
        assert_eq!(
            parse_hunk_header(b"@@ -1,2 +3 @@ fn x"),
            Some((1, 2, 3, 1, b"fn x".to_vec()))
        );
        assert_eq!(parse_hunk_header(b"@@ -1,2 +3 @"), None);
        assert_eq!(parse_hunk_header(b"@@ -a +3 @@"), None);
    }
}
