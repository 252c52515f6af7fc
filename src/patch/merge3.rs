//! The 3-way line merge: the project's version and the patched pre-image, both against the
//! pre-image.
//!
//! The invariant kept: an edit is taken from one side only where the other side left that
//! region of the base alone. Changes from both sides that overlap or touch are a conflict
//! unless they are identical, never resolved by guessing; with markers the conflict is
//! written diff3-style (`<<<<<<< project`, `||||||| pre-image`, `=======`,
//! `>>>>>>> patch`); without them the output holds `ours` there and the conflict is only
//! reported.

/// A changed region between a base and one side: base lines `b0..b1` became side lines
/// `s0..s1`.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    b0: usize,
    b1: usize,
    s0: usize,
    s1: usize,
}

fn chunks(base: &[&[u8]], side: &[&[u8]]) -> Vec<Chunk> {
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, base, side);
    let mut out: Vec<Chunk> = Vec::new();
    let mut open: Option<Chunk> = None;
    for op in ops {
        let (tag, o, n) = op.as_tag_tuple();
        if tag == similar::DiffTag::Equal {
            if let Some(c) = open.take() {
                out.push(c);
            }
            continue;
        }
        match &mut open {
            Some(c) => {
                c.b1 = o.end;
                c.s1 = n.end;
            }
            None => {
                open = Some(Chunk {
                    b0: o.start,
                    b1: o.end,
                    s0: n.start,
                    s1: n.end,
                })
            }
        }
    }
    if let Some(c) = open {
        out.push(c);
    }
    out
}

/// A region where both sides changed the base differently.
#[derive(Clone, Debug)]
pub(crate) struct Conflict3 {
    pub(crate) base: (usize, usize),
    pub(crate) ours: (usize, usize),
}

pub(crate) struct Merge3 {
    pub(crate) out: Vec<u8>,
    pub(crate) conflicts: Vec<Conflict3>,
}

fn push_lines(out: &mut Vec<u8>, lines: &[&[u8]]) {
    for l in lines {
        out.extend_from_slice(l);
    }
}

fn push_marked(out: &mut Vec<u8>, marker: &str, lines: &[&[u8]]) {
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(marker.as_bytes());
    out.push(b'\n');
    push_lines(out, lines);
}

fn slice_lines<'x>(v: &[&'x [u8]], a: isize, b: isize) -> Vec<&'x [u8]> {
    let (a, b) = (a.max(0) as usize, b.max(0) as usize);
    v.get(a..b).map(|s| s.to_vec()).unwrap_or_default()
}

/// Line-based 3-way merge of `ours` and `theirs` against `base`. Changes from both sides that
/// overlap or touch are conflicts unless identical. With `markers`, conflicts are written
/// diff3-style into the output; otherwise the output holds our side there.
pub(crate) fn merge3(base: &[&[u8]], ours: &[&[u8]], theirs: &[&[u8]], markers: bool) -> Merge3 {
    let co = chunks(base, ours);
    let ct = chunks(base, theirs);
    let mut all: Vec<(bool, Chunk)> = co
        .iter()
        .map(|c| (true, *c))
        .chain(ct.iter().map(|c| (false, *c)))
        .collect();
    all.sort_by_key(|(is_ours, c)| (c.b0, c.b1, !*is_ours));
    let mut out = Vec::new();
    let mut conflicts = Vec::new();
    let (mut prev, mut off_o, mut off_t) = (0usize, 0isize, 0isize);
    let mut i = 0;
    while i < all.len() {
        let lo = all[i].1.b0;
        let mut hi = all[i].1.b1;
        let mut j = i + 1;
        while j < all.len() && all[j].1.b0 <= hi {
            hi = hi.max(all[j].1.b1);
            j += 1;
        }
        let members = &all[i..j];
        push_lines(&mut out, base.get(prev..lo).unwrap_or(&[]));
        let delta = |want_ours: bool| -> (bool, isize) {
            let mut any = false;
            let mut d = 0isize;
            for (is_ours, c) in members {
                if *is_ours == want_ours {
                    any = true;
                    d += (c.s1 - c.s0) as isize - (c.b1 - c.b0) as isize;
                }
            }
            (any, d)
        };
        let (has_o, d_o) = delta(true);
        let (has_t, d_t) = delta(false);
        let (o_lo, o_hi) = (lo as isize + off_o, hi as isize + off_o + d_o);
        let (t_lo, t_hi) = (lo as isize + off_t, hi as isize + off_t + d_t);
        let o_lines = slice_lines(ours, o_lo, o_hi);
        let t_lines = slice_lines(theirs, t_lo, t_hi);
        if has_o && !has_t {
            push_lines(&mut out, &o_lines);
        } else if has_t && !has_o {
            push_lines(&mut out, &t_lines);
        } else if o_lines == t_lines {
            push_lines(&mut out, &o_lines);
        } else {
            conflicts.push(Conflict3 {
                base: (lo, hi),
                ours: (o_lo.max(0) as usize, o_hi.max(0) as usize),
            });
            if markers {
                push_marked(&mut out, "<<<<<<< project", &o_lines);
                push_marked(
                    &mut out,
                    "||||||| pre-image",
                    base.get(lo..hi).unwrap_or(&[]),
                );
                push_marked(&mut out, "=======", &t_lines);
                push_marked(&mut out, ">>>>>>> patch", &[]);
            } else {
                push_lines(&mut out, &o_lines);
            }
        }
        off_o += d_o;
        off_t += d_t;
        prev = hi;
        i = j;
    }
    push_lines(&mut out, base.get(prev..).unwrap_or(&[]));
    Merge3 { out, conflicts }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::parse::split_lines;

    fn ls(s: &str) -> Vec<&[u8]> {
        split_lines(s.as_bytes())
    }

    #[test]
    fn merge_non_overlapping() {
        let base = ls("a\nb\nc\nd\ne\nf\ng\n");
        let ours = ls("A\nb\nc\nd\ne\nf\ng\n");
        let theirs = ls("a\nb\nc\nd\ne\nf\nG\n");
        let m = merge3(&base, &ours, &theirs, false);
        assert!(m.conflicts.is_empty());
        assert_eq!(m.out, b"A\nb\nc\nd\ne\nf\nG\n");
    }

    #[test]
    fn merge_overlapping() {
        let base = ls("a\nb\nc\n");
        let ours = ls("a\nB1\nc\n");
        let theirs = ls("a\nB2\nc\n");
        let m = merge3(&base, &ours, &theirs, true);
        assert_eq!(m.conflicts.len(), 1);
        let s = String::from_utf8(m.out).unwrap();
        assert!(
            s.contains("<<<<<<< project\nB1\n||||||| pre-image\nb\n=======\nB2\n>>>>>>> patch\n"),
            "{s}"
        );
    }

    #[test]
    fn merge_same_change() {
        let base = ls("a\nb\nc\n");
        let both = ls("a\nX\nc\n");
        let m = merge3(&base, &both, &both, false);
        assert!(m.conflicts.is_empty());
        assert_eq!(m.out, b"a\nX\nc\n");
    }
}
