//! Placing hunks: where each hunk of a file patch fits a file's lines, and the file they
//! make.
//!
//! The invariant kept: a hunk is placed only where its old side (context and deletions)
//! matches the file exactly, line for line: no fuzz, no whitespace leniency. Hunks are
//! placed in patch order, each after the previous one, so they never overlap. With offsets
//! allowed, the match nearest the line the header names wins (like `git apply` and
//! `patch`), searched in both directions; without, only the stated line counts. Hunks are
//! anchored as `git apply` anchors them (`match_beginning`/`match_end` in git's apply.c):
//! one that starts at line 0 or 1 of its side matches only at the top of the file, and one
//! without trailing context (context-free `-U0` hunks included) only at the end, whatever
//! the offset. So a hunk with no context lines is never placed at a line that merely
//! looks the same, and the hunk that fills an empty file (`@@ -0,0 +1,n @@`) fits only an
//! empty file. `reverse` places the new side instead, which is how an already applied
//! patch is recognised.

use crate::patch::model::{Hunk, LineKind};

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
    // Counted as git counts them: context before the first change, and context after the
    // last one (a hunk without changes is all leading and all trailing context).
    let leading = h
        .lines
        .iter()
        .take_while(|l| l.kind == LineKind::Context)
        .count();
    let trailing = h
        .lines
        .iter()
        .rev()
        .take_while(|l| l.kind == LineKind::Context)
        .count();
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
        // git's rules (apply.c, without --unidiff-zero): a hunk whose side starts at line 0
        // or 1 must match at the beginning, with or without leading context; a hunk
        // without trailing context must match at the end.
        match_begin: start <= 1,
        match_end: trailing == 0,
    }
}

impl Sides<'_> {
    /// Why the hunk can only be placed at one end of the file, for conflict reports.
    pub(crate) fn anchor(&self) -> Option<&'static str> {
        match (self.match_begin, self.match_end) {
            (true, true) => Some(
                "it starts at the top and has no trailing context, so (as in git apply) it must match the whole file",
            ),
            (true, false) => Some("it starts at line 1, so (as in git apply) it must match at the top of the file"),
            (false, true) => Some(
                "it has no trailing context, so (as in git apply) it must match at the end of the file",
            ),
            (false, false) => None,
        }
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
    // An anchored hunk has one possible place: no search.
    if s.match_begin || s.match_end {
        let p = if s.match_begin { 0 } else { max };
        return (p >= from && matches(p)).then_some(p);
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
                .map(|(k, t)| crate::patch::model::HunkLine {
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
        let end = h(2, 2, &[(Context, "a\n"), (Delete, "b\n")]);
        assert!(apply_hunks(&ls("a\nb\nc\n"), std::slice::from_ref(&end), false, true).is_err());
        assert_eq!(
            apply_hunks(&ls("z\na\nb\n"), std::slice::from_ref(&end), false, true)
                .unwrap()
                .out,
            b"z\na\n"
        );
        // This test used to place the same hunk stated at line 1 after "z" (an offset). git
        // anchors a hunk stated at line 0 or 1 to the top (apply.c's match_beginning, with
        // or without leading context), so with no trailing context either it must match
        // the whole file.
        let whole = h(1, 2, &[(Context, "a\n"), (Delete, "b\n")]);
        assert!(apply_hunks(&ls("z\na\nb\n"), std::slice::from_ref(&whole), false, true).is_err());
        assert_eq!(
            apply_hunks(&ls("a\nb\n"), std::slice::from_ref(&whole), false, true)
                .unwrap()
                .out,
            b"a\n"
        );
        // No context at all (-U0): the end of the file, never a look-alike line elsewhere.
        let zero = h(3, 1, &[(Delete, "x\n")]);
        assert!(apply_hunks(
            &ls("a\nb\nx\ny\n"),
            std::slice::from_ref(&zero),
            false,
            true
        )
        .is_err());
        assert!(apply_hunks(
            &ls("a\nb\nx\ny\n"),
            std::slice::from_ref(&zero),
            false,
            false
        )
        .is_err());
        let p = apply_hunks(
            &ls("z\na\nb\nx\n"),
            std::slice::from_ref(&zero),
            false,
            true,
        )
        .unwrap();
        assert_eq!((p.out, p.offsets), (b"z\na\nb\n".to_vec(), vec![1]));
        // The hunk that fills an empty file fits only an empty file.
        let fill = h(0, 0, &[(Insert, "new\n")]);
        assert!(apply_hunks(&ls("user\n"), std::slice::from_ref(&fill), false, true).is_err());
        assert_eq!(
            apply_hunks(&[], std::slice::from_ref(&fill), false, false)
                .unwrap()
                .out,
            b"new\n"
        );
    }
}
