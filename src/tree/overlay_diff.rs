//! The diff of an overlay view against its base, from the upper layers' scans alone.
//!
//! Every path that differs from the base was touched in some layer above it, so the suspects
//! are the paths the scans list (and the base nodes under what they hide); each suspect's
//! new side is read from the view, its old side from the base. A copied-up file whose content
//! equals the base's is no change. The result is what [`crate::tree::diff::diff_trees`] gives
//! for the same view — the same changes in the same order, the same ignored paths — at the
//! cost of what changed instead of the tree's size.
//!
//! Invariant: `nodes` is sorted by path bytes (the base's order).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::fs::overlay::upper::UpperScan;
use crate::fs::RelPath;
use crate::tree::diff::{read_node, BaseSource, Change, TreeDiff};
use crate::tree::snapshot::{Node, NodeKind};

fn index_of(nodes: &[Node], rel: &[u8]) -> Option<usize> {
    nodes.binary_search_by(|n| n.rel.as_bytes().cmp(rel)).ok()
}

/// The changes of `view` against the base (`nodes`, read through `src`) that `scan` (the
/// merged scans of every layer above the base) allows. New paths `is_ignored` accepts are
/// listed as ignored, not changed.
pub fn diff_scan(
    nodes: &[Node],
    src: &dyn BaseSource,
    view: &Path,
    scan: &UpperScan,
    is_ignored: &dyn Fn(&RelPath) -> bool,
) -> Result<TreeDiff> {
    let mut suspects: BTreeSet<&[u8]> = scan.present.iter().map(Vec::as_slice).collect();
    for rel in &scan.hidden {
        if index_of(nodes, rel).is_some() {
            suspects.insert(rel);
        }
    }
    for dir in &scan.hidden_below {
        let start = if dir.is_empty() {
            0
        } else {
            let mut prefix = dir.clone();
            prefix.push(b'/');
            nodes.partition_point(|n| n.rel.as_bytes() < prefix.as_slice())
        };
        for n in &nodes[start..] {
            let b = n.rel.as_bytes();
            let below = b.starts_with(dir) && b.get(dir.len()) == Some(&b'/');
            if !dir.is_empty() && !below {
                break;
            }
            suspects.insert(b);
        }
    }
    let mut out = TreeDiff::default();
    for rel in suspects {
        let rel_path = RelPath::from_bytes(rel)?;
        let bi = index_of(nodes, rel);
        let new = if scan.present.contains(rel) {
            let p = view.join(OsStr::from_bytes(rel));
            match std::fs::symlink_metadata(&p) {
                Ok(m) => NodeKind::from_metadata(&m).map(|k| (k, m.len())),
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ENOTDIR) =>
                {
                    None
                }
                Err(e) => return Err(Error::io("stat", &p, e)),
            }
        } else {
            None
        };
        let old = bi.map(|i| nodes[i].kind);
        match (bi, new) {
            (None, None) => continue,
            (None, Some(_)) if is_ignored(&rel_path) => {
                out.ignored.push(rel_path);
                continue;
            }
            (Some(i), Some((kind, len))) if old == Some(kind) => {
                let p = view.join(OsStr::from_bytes(rel));
                let same_size = kind == NodeKind::Symlink || src.size(i).is_none_or(|s| s == len);
                if same_size && src.read(i)? == read_node(&p, kind)? {
                    continue;
                }
            }
            _ => {}
        }
        out.changes.push(Change {
            rel: rel_path,
            base_index: bi,
            old,
            new: new.map(|(k, _)| k),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir<'a>(&'a Path, Vec<Node>);
    impl BaseSource for Dir<'_> {
        fn read(&self, i: usize) -> Result<Vec<u8>> {
            let n = &self.1[i];
            read_node(&self.0.join(n.rel.as_path()), n.kind)
        }
        fn size(&self, _: usize) -> Option<u64> {
            None
        }
    }

    /// fuse-overlayfs without privileges marks deletions with `.wh.<name>` files and
    /// opaque directories with `.wh..wh..opq` (no device nodes, no trusted xattrs).
    #[test]
    fn fuse_wh_files_are_deletions() {
        let t = tempfile::tempdir().unwrap();
        let (base_dir, upper, view) = (t.path().join("b"), t.path().join("u"), t.path().join("v"));
        for (rel, data) in [("keep", "k"), ("del", "x"), ("d/old", "o"), ("e/f", "f")] {
            for root in [&base_dir, &view] {
                let p = root.join(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, data).unwrap();
            }
        }
        // The view after: del and d/old gone, d/new added, e/f unchanged.
        std::fs::remove_file(view.join("del")).unwrap();
        std::fs::remove_file(view.join("d/old")).unwrap();
        std::fs::write(view.join("d/new"), "n").unwrap();
        std::fs::create_dir_all(upper.join("d")).unwrap();
        std::fs::write(upper.join(".wh.del"), "").unwrap();
        std::fs::write(upper.join("d/.wh..wh..opq"), "").unwrap();
        std::fs::write(upper.join("d/new"), "n").unwrap();
        let nodes: Vec<Node> = crate::tree::snapshot::list_tree(&base_dir)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let base = Dir(&base_dir, nodes);
        let scan = crate::fs::overlay::upper::scan(&upper, true).unwrap();
        let d = diff_scan(&base.1, &base, &view, &scan, &|_| false).unwrap();
        let got: Vec<(String, bool, bool)> = d
            .changes
            .iter()
            .map(|c| {
                let p = c.rel.as_path().to_string_lossy().into_owned();
                (p, c.old.is_some(), c.new.is_some())
            })
            .collect();
        let want = [
            ("d/new", false, true),
            ("d/old", true, false),
            ("del", true, false),
        ];
        let want: Vec<(String, bool, bool)> = want
            .iter()
            .map(|(p, o, n)| (p.to_string(), *o, *n))
            .collect();
        assert_eq!(got, want);
    }
}
