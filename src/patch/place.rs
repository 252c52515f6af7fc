//! Placing hunks: where each hunk of a file patch fits a file's lines, and the file they
//! make.
//!
//! The invariant kept: a hunk is placed only where its old side (context and deletions)
//! matches the file exactly, line for line: no fuzz, no whitespace leniency. Hunks are
//! placed in patch order, each after the previous one, so they never overlap. With offsets
//! allowed, the match nearest the line the header names wins (like `git apply` and
//! `patch`), searched in both directions; without, only the stated line counts. A hunk
//! without leading context that starts at line 1 stays at the top, and one without trailing
//! context ends at the end of the file. `reverse` places the new side instead, which is how
//! an already applied patch is recognised.

use crate::patch::parse::{Hunk, LineKind};

/// One side of a hunk as line slices.
pub(crate) struct Sides<'h> {
    pub(crate) old: Vec<&'h [u8]>,
    new: Vec<&'h [u8]>,
    pub(crate) leading: usize,
    pub(crate) trailing: usize,
    /// 0-based line index where the old side is expected.
    pub(crate) expected: usize,
    match_begin: bool,
    match_end: bool,
}

pub(crate) fn sides(h: &Hunk, reverse: bool) -> Sides<'_> {
    let (old_kind, new_kind) = if reverse {
        (LineKind::Insert, LineKind::Delete)
    } else {
        (LineKind::Delete, LineKind::Insert)
    };
    let old: Vec<&[u8]> = h
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Context || l.kind == old_kind)
        .map(|l| l.text.as_slice())
        .collect();
    let new: Vec<&[u8]> = h
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Context || l.kind == new_kind)
        .map(|l| l.text.as_slice())
        .collect();
    let leading = h
        .lines
        .iter()
        .take_while(|l| l.kind == LineKind::Context)
        .count();
    let trailing = if leading == h.lines.len() {
        0
    } else {
        h.lines
            .iter()
            .rev()
            .take_while(|l| l.kind == LineKind::Context)
            .count()
    };
    let (start, len) = if reverse {
        (h.new_start, h.new_len)
    } else {
        (h.old_start, h.old_len)
    };
    let expected = if len == 0 {
        start
    } else {
        start.saturating_sub(1)
    };
    Sides {
        old,
        new,
        leading,
        trailing,
        expected,
        // A hunk without leading context that starts at the top must stay there; one without
        // trailing context (but with leading context) must end at the end of the file.
        match_begin: leading == 0 && start <= 1,
        match_end: trailing == 0 && leading > 0,
    }
}

/// Where the old side of `s` matches in `cur`, at or after `from`: the expected line first,
/// then the nearest offsets in both directions when `allow_offset`.
pub(crate) fn find_hunk(
    cur: &[&[u8]],
    s: &Sides<'_>,
    from: usize,
    expected: isize,
    allow_offset: bool,
) -> Option<usize> {
    let m = s.old.len();
    if m > cur.len() {
        return None;
    }
    let max = cur.len() - m;
    if from > max {
        return None;
    }
    let matches = |p: usize| {
        (!s.match_begin || p == 0)
            && (!s.match_end || p == max)
            && cur.get(p..p + m).is_some_and(|w| w == s.old.as_slice())
    };
    if !allow_offset {
        let p = usize::try_from(expected).ok()?;
        return (p >= from && p <= max && matches(p)).then_some(p);
    }
    let e = usize::try_from(expected.max(0))
        .unwrap_or(0)
        .clamp(from, max);
    for d in 0..=(max - from) {
        let up = e.checked_add(d).filter(|&p| p <= max);
        let down = e.checked_sub(d).filter(|&p| p >= from && d > 0);
        if up.is_none() && down.is_none() {
            break;
        }
        if let Some(p) = up.filter(|&p| matches(p)) {
            return Some(p);
        }
        if let Some(p) = down.filter(|&p| matches(p)) {
            return Some(p);
        }
    }
    None
}

/// Where each hunk of `hunks` fits `cur`, in order (each after the previous): the start
/// line of its old side and its offset from where the header put it; `Err(k)` names the first
/// hunk (0-based) that does not fit.
fn place_hunks(
    cur: &[&[u8]],
    hunks: &[Hunk],
    reverse: bool,
    allow_offset: bool,
) -> std::result::Result<(Vec<usize>, Vec<isize>), usize> {
    let mut cursor = 0usize;
    let mut carry: isize = 0;
    let mut pos = Vec::with_capacity(hunks.len());
    let mut offsets = Vec::with_capacity(hunks.len());
    for (k, h) in hunks.iter().enumerate() {
        let s = sides(h, reverse);
        let p = find_hunk(cur, &s, cursor, s.expected as isize + carry, allow_offset).ok_or(k)?;
        cursor = p + s.old.len();
        carry = p as isize - s.expected as isize;
        pos.push(p);
        offsets.push(carry);
    }
    Ok((pos, offsets))
}

/// Whether every hunk of `hunks` fits `cur` (in order), without building the result.
pub(crate) fn hunks_fit(cur: &[&[u8]], hunks: &[Hunk], reverse: bool, allow_offset: bool) -> bool {
    place_hunks(cur, hunks, reverse, allow_offset).is_ok()
}

/// The result of placing every hunk.
pub(crate) struct Placed {
    pub(crate) out: Vec<u8>,
    /// Start line (0-based) of each hunk's old side in the input.
    pub(crate) pos: Vec<usize>,
    /// Offset of each hunk from where the header put it.
    pub(crate) offsets: Vec<isize>,
}

/// Applies `hunks` to `cur` in order (each after the previous); `Err(k)` names the first hunk
/// (0-based) that does not match.
pub(crate) fn apply_hunks(
    cur: &[&[u8]],
    hunks: &[Hunk],
    reverse: bool,
    allow_offset: bool,
) -> std::result::Result<Placed, usize> {
    let (pos, offsets) = place_hunks(cur, hunks, reverse, allow_offset)?;
    // Sized up front: a large file is built without reallocating (and copying) as it grows.
    let added: usize = hunks
        .iter()
        .flat_map(|h| h.lines.iter())
        .map(|l| l.text.len())
        .sum();
    let mut out = Vec::with_capacity(cur.iter().map(|l| l.len()).sum::<usize>() + added);
    let mut cursor = 0usize;
    for (h, &p) in hunks.iter().zip(&pos) {
        let s = sides(h, reverse);
        for l in &cur[cursor..p] {
            out.extend_from_slice(l);
        }
        for l in &s.new {
            out.extend_from_slice(l);
        }
        cursor = p + s.old.len();
    }
    for l in &cur[cursor..] {
        out.extend_from_slice(l);
    }
    Ok(Placed { out, pos, offsets })
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::parse::split_lines;

    fn ls(s: &str) -> Vec<&[u8]> {
        split_lines(s.as_bytes())
    }

    #[test]
    fn hunks_at_offsets_and_anchors() {
        let h = |old_start, old_len, lines: &[(LineKind, &str)]| Hunk {
            old_start,
            old_len,
            new_start: old_start,
            new_len: 0,
            section: Vec::new(),
            lines: lines
                .iter()
                .map(|(k, t)| crate::patch::parse::HunkLine {
                    kind: *k,
                    text: t.as_bytes().to_vec(),
                })
                .collect(),
            line: 1,
        };
        use LineKind::*;
        // Context "b", "c"; change "c" -> "C"; expected at line 2, found at line 4.
        let hunk = h(
            2,
            3,
            &[
                (Context, "b\n"),
                (Delete, "c\n"),
                (Insert, "C\n"),
                (Context, "d\n"),
            ],
        );
        let cur = ls("x\ny\na\nb\nc\nd\n");
        let p = apply_hunks(&cur, std::slice::from_ref(&hunk), false, true).unwrap();
        assert_eq!(p.out, b"x\ny\na\nb\nC\nd\n");
        assert_eq!(p.offsets, [2]);
        assert!(apply_hunks(&cur, std::slice::from_ref(&hunk), false, false).is_err());
        // No leading context at line 1: must match at the top.
        let top = h(1, 1, &[(Delete, "b\n"), (Insert, "B\n")]);
        assert!(apply_hunks(&ls("a\nb\n"), std::slice::from_ref(&top), false, true).is_err());
        // No trailing context: must match at the end.
        let end = h(1, 2, &[(Context, "a\n"), (Delete, "b\n")]);
        assert!(apply_hunks(&ls("a\nb\nc\n"), std::slice::from_ref(&end), false, true).is_err());
        assert_eq!(
            apply_hunks(&ls("z\na\nb\n"), std::slice::from_ref(&end), false, true)
                .unwrap()
                .out,
            b"z\na\n"
        );
    }
}
