//! The patch between two directory trees, read from disk: the plan executors'
//! `_fs_utils.compute_diff(original, modified)`, for the C++ face.
//!
//! Why a function of its own: a sandbox's diff is driven by its base and stat manifest
//! ([`super::diff`]); here there are just two directories, compared by content. The patch is
//! written by the same writer as every other patch of the library ([`crate::patch::write`]),
//! so `git apply` and `patch -p1` read it (binary changes as git binary literals, modes and
//! symlinks as git records them). Invariants: symlinks are compared by target, never
//! followed; `.git` directories are skipped (as [`snapshot::list_tree`] does); paths come out
//! sorted by path bytes (git's order).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::patch::write::{write_file_diff, Side};
use crate::tree::snapshot::{self, Node, NodeKind};

/// The files and symlinks of `root`, sorted; an absent `root` is an empty tree (a diff
/// against nothing is every file added), anything else that is not a directory an error.
fn nodes(root: &Path) -> Result<Vec<Node>> {
    match std::fs::symlink_metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("stat", root, e)),
        Ok(m) if !m.is_dir() => Err(Error::io(
            "diff a directory",
            root,
            std::io::Error::other("not a directory"),
        )),
        Ok(_) => Ok(snapshot::list_tree(root)?
            .into_iter()
            .map(|(n, _)| n)
            .collect()),
    }
}

/// A node's content: a file's bytes, a symlink's target.
fn content(root: &Path, n: &Node) -> Result<Vec<u8>> {
    let p = root.join(n.rel.as_path());
    match n.kind {
        NodeKind::Symlink => std::fs::read_link(&p)
            .map(|t| t.as_os_str().as_bytes().to_vec())
            .map_err(|e| Error::io("read link", &p, e)),
        NodeKind::File { .. } => std::fs::read(&p).map_err(|e| Error::io("read", &p, e)),
    }
}

/// One side of a path's diff, when the path is on that side.
fn side<'a>(n: Option<&'a Node>, data: Option<&'a [u8]>) -> Option<Side<'a>> {
    n.zip(data).map(|(n, d)| Side {
        path: &n.rel,
        mode: n.kind.git_mode(),
        data: d,
    })
}

/// The git-style patch that turns the tree `original` into the tree `modified` (empty when
/// their files, symlinks and executable bits are the same). A side that does not exist is an
/// empty tree.
///
/// ```
/// let a = tempfile::tempdir()?;
/// let b = tempfile::tempdir()?;
/// std::fs::write(a.path().join("notes.txt"), "one\n")?;
/// std::fs::write(b.path().join("notes.txt"), "two\n")?;
/// let patch = patchbox::tree::dir_diff::diff_dirs(a.path(), b.path())?;
/// let text = String::from_utf8(patch)?;
/// assert!(text.starts_with("diff --git a/notes.txt b/notes.txt\n"));
/// assert!(text.ends_with("@@ -1 +1 @@\n-one\n+two\n"));
/// assert!(patchbox::tree::dir_diff::diff_dirs(a.path(), a.path())?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn diff_dirs(original: &Path, modified: &Path) -> Result<Vec<u8>> {
    let (a, b) = (nodes(original)?, nodes(modified)?);
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let ord = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.rel.as_bytes().cmp(y.rel.as_bytes()),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        let old = (ord != std::cmp::Ordering::Greater).then(|| &a[i]);
        let new = (ord != std::cmp::Ordering::Less).then(|| &b[j]);
        let old_data = old.map(|n| content(original, n)).transpose()?;
        let new_data = new.map(|n| content(modified, n)).transpose()?;
        // Identical sides write nothing (the writer's own rule).
        write_file_diff(
            &mut out,
            side(old, old_data.as_deref()),
            side(new, new_data.as_deref()),
        );
        i += usize::from(old.is_some());
        j += usize::from(new.is_some());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn text(a: &Path, b: &Path) -> String {
        String::from_utf8(diff_dirs(a, b).unwrap()).unwrap()
    }

    #[test]
    fn added_deleted_modified_symlinks_and_modes_in_path_order() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (a.path(), b.path());
        std::fs::create_dir_all(a.join("src")).unwrap();
        std::fs::create_dir_all(b.join("src")).unwrap();
        std::fs::write(a.join("gone.txt"), "bye\n").unwrap();
        std::fs::write(b.join("new.txt"), "hi\n").unwrap();
        std::fs::write(a.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(b.join("src/main.rs"), "fn main() { run() }\n").unwrap();
        std::fs::write(a.join("run.sh"), "echo\n").unwrap();
        std::fs::write(b.join("run.sh"), "echo\n").unwrap();
        std::fs::set_permissions(b.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        symlink("src/main.rs", a.join("link")).unwrap();
        symlink("new.txt", b.join("link")).unwrap();
        std::fs::write(a.join("same.txt"), "same\n").unwrap();
        std::fs::write(b.join("same.txt"), "same\n").unwrap();
        let t = text(a, b);
        let heads: Vec<&str> = t.lines().filter(|l| l.starts_with("diff --git")).collect();
        assert_eq!(
            heads,
            [
                "diff --git a/gone.txt b/gone.txt",
                "diff --git a/link b/link",
                "diff --git a/new.txt b/new.txt",
                "diff --git a/run.sh b/run.sh",
                "diff --git a/src/main.rs b/src/main.rs",
            ]
        );
        assert!(t.contains("deleted file mode 100644\n"), "{t}");
        assert!(t.contains("new file mode 100644\n"), "{t}");
        assert!(t.contains("old mode 100644\nnew mode 100755\n"), "{t}");
        assert!(
            t.contains("-src/main.rs\n\\ No newline at end of file\n+new.txt\n"),
            "{t}"
        );
    }

    #[test]
    fn a_missing_side_is_an_empty_tree_and_a_file_is_refused() {
        let a = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("x"), "1\n").unwrap();
        let t = text(&a.path().join("absent"), a.path());
        assert!(
            t.starts_with("diff --git a/x b/x\nnew file mode 100644\n"),
            "{t}"
        );
        let e = diff_dirs(&a.path().join("x"), a.path()).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
