//! Directories in path order: which ones lie above a set of paths, and whether one holds a
//! path below it.
//!
//! The write phase records the modes and mtimes of every directory above what it changes,
//! keeps a directory that something is placed below, and creates missing parents; undo
//! lists the same directories for its record. These helpers keep each of those in time
//! proportional to the bytes of the paths (sorted once, each shared prefix compared once),
//! never one lookup per ancestor, however deep the paths.

use crate::fs::relpath::RelPath;

/// How many leading components `a` and `b` have in common (one pass over their bytes).
pub(super) fn shared_components(a: &RelPath, b: &RelPath) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let c = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let slashes = a[..c].iter().filter(|&&x| x == b'/').count();
    let whole = |s: &[u8]| s.get(c).is_none_or(|&x| x == b'/');
    if c > 0 && whole(a) && whole(b) {
        slashes + 1
    } else {
        slashes
    }
}

/// Whether `dir` is a proper ancestor of `p`.
pub(super) fn is_above(dir: &RelPath, p: &RelPath) -> bool {
    let (d, p) = (dir.as_bytes(), p.as_bytes());
    p.len() > d.len() && p.starts_with(d) && p[d.len()] == b'/'
}

/// Every directory above `paths` (each proper ancestor of each path), once each, in path
/// order (a directory before what is below it). The paths are sorted first; then the
/// directories a path shares with the path before it (by then listed) are skipped after
/// one comparison of their bytes, and only those below are listed, found from the path
/// upwards: whatever the depth of the paths, the listing costs time proportional to their
/// length plus the bytes of the directories it lists, never a lookup of every ancestor in
/// a set.
pub(super) fn dirs_above<'a>(paths: impl IntoIterator<Item = &'a RelPath>) -> Vec<RelPath> {
    let mut sorted: Vec<&RelPath> = paths.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup_by(|a, b| a.as_bytes() == b.as_bytes());
    let mut out = Vec::new();
    let mut prev: Option<(&RelPath, usize)> = None;
    for p in sorted {
        let depth = p.depth();
        // Directories above `prev` are listed, and, the paths being sorted, no earlier
        // path shares more of `p` than `prev` does (a path sorts before those below it).
        let listed = prev.map_or(0, |(q, qd)| shared_components(q, p).min(qd - 1));
        let start = out.len();
        let mut a = p.parent();
        let mut d = depth.saturating_sub(1);
        while let Some(dir) = a {
            if d <= listed {
                break;
            }
            a = dir.parent();
            out.push(dir);
            d -= 1;
        }
        out[start..].reverse();
        prev = Some((p, depth));
    }
    out
}

/// `sorted` (in path order) holds a path below `dir`.
pub(super) fn any_below(sorted: &[&RelPath], dir: &RelPath) -> bool {
    // What is below `dir` sorts right after `dir` itself.
    let i = sorted.partition_point(|p| *p <= dir);
    sorted.get(i).is_some_and(|p| is_above(dir, p))
}
