//! The line diff behind the patch writer: the edit script turning one file's lines into
//! another's, minimal where it can be and bounded in time where it cannot.
//!
//! As in xdiff, the common head and tail are matched first and lines that occur only on one
//! side are set aside before Myers runs (the `similar` crate), so a small edit to a huge file
//! costs the edited region and a rewritten file is diffed in linear time; a time limit per
//! file bounds the pathological cases, past which the script is coarser but still exact.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffOp};

/// How long Myers may search for a minimal diff of one file before settling for a coarser
/// one (see `line_ops`).
const DIFF_TIME_LIMIT: Duration = Duration::from_secs(5);

/// The edit script turning `old` lines into `new` lines.
///
/// Like xdiff, lines that occur nowhere on the other side are set aside before running Myers:
/// they can never be part of a match, so the script stays minimal, and a rewritten file (where
/// most lines are unique to one side) is diffed in linear time instead of quadratic time.
/// Myers then runs on the remaining lines with a time limit ([`DIFF_TIME_LIMIT`]); past it,
/// `similar` finishes with a coarser (still correct) script rather than running on.
pub(crate) fn line_ops<'a>(old: &[&'a [u8]], new: &[&'a [u8]]) -> Vec<DiffOp> {
    // As xdiff does, the common head and tail are matched before anything else: a small edit
    // to a huge file then costs time and memory for the edited region only.
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let room = old.len().min(new.len()) - head;
    let tail = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let mut ops = Vec::new();
    for i in 0..head {
        push_equal(&mut ops, i, i);
    }
    let (old_end, new_end) = (old.len() - tail, new.len() - tail);
    for op in middle_ops(&old[head..old_end], &new[head..new_end]) {
        match op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for k in 0..len {
                    push_equal(&mut ops, head + old_index + k, head + new_index + k);
                }
            }
            other => {
                let (o, n) = (other.old_range(), other.new_range());
                push_gap(
                    &mut ops,
                    head + o.start..head + o.end,
                    head + n.start..head + n.end,
                );
            }
        }
    }
    for k in 0..tail {
        push_equal(&mut ops, old_end + k, new_end + k);
    }
    ops
}

/// [`line_ops`] for the region between the common head and tail.
fn middle_ops<'a>(old: &[&'a [u8]], new: &[&'a [u8]]) -> Vec<DiffOp> {
    let mut ids: HashMap<&'a [u8], usize> = HashMap::new();
    let old_ids = intern(&mut ids, old);
    let new_ids = intern(&mut ids, new);
    let distinct = ids.len();
    let mut in_old = vec![false; distinct];
    let mut in_new = vec![false; distinct];
    for &id in &old_ids {
        in_old[id] = true;
    }
    for &id in &new_ids {
        in_new[id] = true;
    }
    // Original positions of the lines that have a counterpart, and their ids.
    let old_keep: Vec<usize> = (0..old_ids.len()).filter(|&i| in_new[old_ids[i]]).collect();
    let new_keep: Vec<usize> = (0..new_ids.len()).filter(|&i| in_old[new_ids[i]]).collect();
    let old_kept: Vec<usize> = old_keep.iter().map(|&i| old_ids[i]).collect();
    let new_kept: Vec<usize> = new_keep.iter().map(|&i| new_ids[i]).collect();

    let deadline = Instant::now().checked_add(DIFF_TIME_LIMIT);
    let reduced =
        similar::capture_diff_slices_deadline(Algorithm::Myers, &old_kept, &new_kept, deadline);

    // Map the matches back to original positions; everything between two matches is a
    // deletion, an insertion or both.
    let mut ops = Vec::new();
    let (mut next_old, mut next_new) = (0, 0);
    for op in reduced {
        if let DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            let olds = old_keep.iter().skip(old_index).take(len);
            let news = new_keep.iter().skip(new_index).take(len);
            for (&o, &n) in olds.zip(news) {
                push_gap(&mut ops, next_old..o, next_new..n);
                push_equal(&mut ops, o, n);
                next_old = o + 1;
                next_new = n + 1;
            }
        }
    }
    push_gap(&mut ops, next_old..old.len(), next_new..new.len());
    ops
}

/// Numbers each distinct line: equal lines get equal ids.
fn intern<'a>(ids: &mut HashMap<&'a [u8], usize>, lines: &[&'a [u8]]) -> Vec<usize> {
    lines
        .iter()
        .map(|&line| {
            let next = ids.len();
            *ids.entry(line).or_insert(next)
        })
        .collect()
}

/// Appends the op for the unmatched lines `old` and `new` (either may be empty).
fn push_gap(ops: &mut Vec<DiffOp>, old: std::ops::Range<usize>, new: std::ops::Range<usize>) {
    let (old_index, new_index) = (old.start, new.start);
    let (old_len, new_len) = (old.len(), new.len());
    match (old_len > 0, new_len > 0) {
        (true, true) => ops.push(DiffOp::Replace {
            old_index,
            old_len,
            new_index,
            new_len,
        }),
        (true, false) => ops.push(DiffOp::Delete {
            old_index,
            old_len,
            new_index,
        }),
        (false, true) => ops.push(DiffOp::Insert {
            old_index,
            new_index,
            new_len,
        }),
        (false, false) => {}
    }
}

/// Appends the match of old line `o` with new line `n`, extending the previous run of equal
/// lines when it is adjacent.
fn push_equal(ops: &mut Vec<DiffOp>, o: usize, n: usize) {
    if let Some(DiffOp::Equal {
        old_index,
        new_index,
        len,
    }) = ops.last_mut()
    {
        if *old_index + *len == o && *new_index + *len == n {
            *len += 1;
            return;
        }
    }
    ops.push(DiffOp::Equal {
        old_index: o,
        new_index: n,
        len: 1,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use similar::DiffTag;

    /// Replays `ops` on `old` and checks that they cover both sides in order and rebuild `new`.
    fn replay(old: &[&[u8]], new: &[&[u8]], ops: &[DiffOp]) -> bool {
        let (mut o, mut n) = (0, 0);
        let mut rebuilt: Vec<&[u8]> = Vec::new();
        for op in ops {
            let (tag, or, nr) = op.as_tag_tuple();
            if or.start != o || nr.start != n {
                return false;
            }
            match tag {
                DiffTag::Equal => {
                    if old[or.clone()] != new[nr.clone()] {
                        return false;
                    }
                    rebuilt.extend_from_slice(&old[or.clone()]);
                }
                _ => rebuilt.extend_from_slice(&new[nr.clone()]),
            }
            (o, n) = (or.end, nr.end);
        }
        o == old.len() && n == new.len() && rebuilt == new
    }

    #[test]
    fn patch_write_line_ops_rebuild_new_minimally() {
        let mut seed: u64 = 0x1234_5678_9abc_def1;
        let mut next = move |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        let words: [&[u8]; 5] = [b"a\n", b"b\n", b"c\n", b"\n", b"d"];
        for _ in 0..500 {
            let old: Vec<&[u8]> = (0..next(30)).map(|_| words[next(5)]).collect();
            let new: Vec<&[u8]> = (0..next(30)).map(|_| words[next(5)]).collect();
            let ops = line_ops(&old, &new);
            assert!(replay(&old, &new, &ops), "{old:?} -> {new:?}: {ops:?}");
            // Setting unmatched lines aside must not lose matches: same number of equal
            // lines as plain Myers on the full sequences.
            let equal = |ops: &[DiffOp]| -> usize {
                ops.iter()
                    .filter(|op| op.tag() == DiffTag::Equal)
                    .map(|op| op.old_range().len())
                    .sum()
            };
            let plain = similar::capture_diff_slices(Algorithm::Myers, &old, &new);
            assert_eq!(equal(&ops), equal(&plain));
        }
    }
}
