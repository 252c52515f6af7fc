//! The project trees of the cases: the model (path → file or symlink), random trees and edits
//! of them (the head side of a patch, local drift), and writing/reading a tree on disk.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;

use super::{Rng, OUTSIDE};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { data: Vec<u8>, exec: bool },
    Link(Vec<u8>),
}

/// Path → node; directories are implied by paths.
pub type Tree = BTreeMap<String, Node>;

const DIRS: &[&str] = &["", "", "d/", "d/e/", "sp ace/"];
const NAMES: &[&str] = &[
    "a.txt",
    "b.txt",
    "c",
    "x y.txt",
    "\u{fc}.txt",
    "bin.dat",
    "l",
    "tab\tname",
    "quo\"te",
    "back\\slash",
    "run.sh",
];
pub(super) const LINES: &[&str] = &["a", "b", "c", "x", "y", "{", "}", "", "same", "same"];
const LINK_TARGETS: &[&str] = &[
    "a.txt",
    "d/b.txt",
    "d",
    ".",
    "missing",
    "../outside",
    "../outside/secret.txt",
    "../../outside",
    "@OUTSIDE@",
    "@OUTSIDE@/secret.txt",
    "/nonexistent-patchbox-fuzz",
];

pub(super) fn random_path(rng: &mut Rng) -> String {
    format!("{}{}", rng.pick(DIRS), rng.pick(NAMES))
}

pub fn random_text(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(14);
    let crlf = rng.chance(1, 10);
    let mut out = Vec::new();
    for i in 0..n {
        if rng.chance(1, 6) {
            out.extend_from_slice(format!("line {}", rng.below(40)).as_bytes());
        } else {
            out.extend_from_slice(rng.pick(LINES).as_bytes());
        }
        if i + 1 < n || !rng.chance(1, 7) {
            out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        }
    }
    out
}

pub fn random_binary(rng: &mut Rng) -> Vec<u8> {
    let n = if rng.chance(1, 2) {
        1 + rng.below(60)
    } else {
        200 + rng.below(1500)
    };
    let period = 1 + rng.below(17);
    let mut out: Vec<u8> = (0..n)
        .map(|i| {
            if rng.chance(1, 8) {
                rng.next_u64() as u8
            } else {
                (i % period) as u8
            }
        })
        .collect();
    out[0] = 0; // a NUL: binary for git and for the writer
    out
}

fn random_node(rng: &mut Rng, path: &str) -> Node {
    if path.ends_with('l') && rng.chance(3, 4) || rng.chance(1, 12) {
        return Node::Link(rng.pick(LINK_TARGETS).as_bytes().to_vec());
    }
    let data = if path.ends_with(".dat") || rng.chance(1, 10) {
        random_binary(rng)
    } else {
        random_text(rng)
    };
    Node::File {
        data,
        exec: path.ends_with(".sh") || rng.chance(1, 8),
    }
}

/// True when `p` can be added to `t` without a file/directory clash.
pub fn can_insert(t: &Tree, p: &str) -> bool {
    if t.contains_key(p) {
        return false;
    }
    let dir_prefix = format!("{p}/");
    if t.keys().any(|k| k.starts_with(&dir_prefix)) {
        return false;
    }
    let mut prefix = String::new();
    for comp in p.split('/').collect::<Vec<_>>().split_last().unwrap().1 {
        prefix.push_str(comp);
        if t.contains_key(&prefix) {
            return false;
        }
        prefix.push('/');
    }
    true
}

pub fn random_tree(rng: &mut Rng) -> Tree {
    let mut t = Tree::new();
    for _ in 0..1 + rng.below(7) {
        let p = random_path(rng);
        if can_insert(&t, &p) {
            let n = random_node(rng, &p);
            t.insert(p, n);
        }
    }
    t
}

fn edit_lines(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = data
        .split_inclusive(|&b| b == b'\n')
        .map(|l| l.to_vec())
        .collect();
    for _ in 0..1 + rng.below(3) {
        let i = rng.below(lines.len() + 1);
        let new_line = format!("{}\n", rng.pick(LINES)).into_bytes();
        match rng.below(4) {
            0 if i < lines.len() => {
                lines.remove(i);
            }
            1 if i < lines.len() => lines[i] = new_line,
            2 if i < lines.len() => {
                // toggle the final newline
                let last = lines.last_mut().unwrap();
                if last.ends_with(b"\n") {
                    last.pop();
                } else {
                    last.push(b'\n');
                }
            }
            _ => {
                if i == lines.len() && lines.last().is_some_and(|l| !l.ends_with(b"\n")) {
                    lines.last_mut().unwrap().push(b'\n');
                }
                lines.insert(i, new_line)
            }
        }
    }
    lines.concat()
}

fn edit_node(rng: &mut Rng, n: &Node) -> Node {
    match n {
        Node::File { data, exec } if data.contains(&0) => {
            let mut d = data.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(d.len());
                match rng.below(3) {
                    0 => d[i] = rng.next_u64() as u8,
                    1 => d.insert(i, rng.next_u64() as u8),
                    _ => {
                        if d.len() > 1 && i > 0 {
                            d.remove(i);
                        }
                    }
                }
            }
            Node::File {
                data: d,
                exec: *exec,
            }
        }
        Node::File { data, exec } => Node::File {
            data: edit_lines(rng, data),
            exec: *exec,
        },
        Node::Link(_) => Node::Link(rng.pick(LINK_TARGETS).as_bytes().to_vec()),
    }
}

/// `base` with 1–6 random edits: line edits, creations, deletions, renames, copies, mode
/// changes, type changes, binary edits, file ↔ directory swaps.
pub fn edit_tree(rng: &mut Rng, base: &Tree) -> Tree {
    let mut t = base.clone();
    for _ in 0..1 + rng.below(6) {
        let keys: Vec<String> = t.keys().cloned().collect();
        let existing = if keys.is_empty() {
            None
        } else {
            Some(rng.pick(&keys).clone())
        };
        match (rng.below(10), existing) {
            (0..=2, Some(p)) => {
                let n = edit_node(rng, &t[&p]);
                t.insert(p, n);
            }
            (3, Some(p)) => {
                t.remove(&p);
            }
            (4, Some(p)) => {
                // rename, maybe with an edit
                let q = random_path(rng);
                let mut n = t.remove(&p).unwrap();
                if rng.chance(1, 2) {
                    n = edit_node(rng, &n);
                }
                if can_insert(&t, &q) {
                    t.insert(q, n);
                } else {
                    t.insert(p, n);
                }
            }
            (5, Some(p)) => {
                // copy, maybe with an edit
                let q = random_path(rng);
                let mut n = t[&p].clone();
                if rng.chance(1, 2) {
                    n = edit_node(rng, &n);
                }
                if can_insert(&t, &q) {
                    t.insert(q, n);
                }
            }
            (6, Some(p)) => match t.get_mut(&p).unwrap() {
                Node::File { exec, .. } => *exec = !*exec,
                n => *n = random_node(rng, "x.txt"),
            },
            (7, Some(p)) => {
                // type change, or file → directory
                if rng.chance(1, 2) {
                    let n = match &t[&p] {
                        Node::File { .. } => Node::Link(rng.pick(LINK_TARGETS).as_bytes().to_vec()),
                        Node::Link(_) => random_node(rng, "x.txt"),
                    };
                    t.insert(p, n);
                } else {
                    t.remove(&p);
                    let q = format!("{p}/in.txt");
                    if can_insert(&t, &q) {
                        let n = random_node(rng, &q);
                        t.insert(q, n);
                    }
                }
            }
            _ => {
                let q = random_path(rng);
                if can_insert(&t, &q) {
                    let n = random_node(rng, &q);
                    t.insert(q, n);
                }
            }
        }
    }
    t
}

/// Local drift: a line edit in one or two text files.
pub fn drift_tree(rng: &mut Rng, t: &Tree) -> Tree {
    let mut t = t.clone();
    let text: Vec<String> = t
        .iter()
        .filter(|(_, n)| matches!(n, Node::File { data, .. } if !data.contains(&0)))
        .map(|(p, _)| p.clone())
        .collect();
    if text.is_empty() {
        return t;
    }
    for _ in 0..1 + rng.below(2) {
        let p = rng.pick(&text).clone();
        let n = edit_node(rng, &t[&p]);
        t.insert(p, n);
    }
    t
}

pub(super) fn subst_outside(bytes: &[u8], outside: &Path) -> Vec<u8> {
    let needle = OUTSIDE.as_bytes();
    let rep = outside.as_os_str().as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(needle) {
            out.extend_from_slice(rep);
            i += needle.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// Writes `t` under `root` (which exists); `@OUTSIDE@` in link targets becomes `outside`.
pub fn write_tree(root: &Path, t: &Tree, outside: &Path) {
    for (p, n) in t {
        let full = root.join(p);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        match n {
            Node::File { data, exec } => {
                fs::write(&full, data).unwrap();
                let mode = if *exec { 0o755 } else { 0o644 };
                fs::set_permissions(&full, fs::Permissions::from_mode(mode)).unwrap();
            }
            Node::Link(target) => {
                let target = subst_outside(target, outside);
                symlink(std::ffi::OsStr::from_bytes(&target), &full).unwrap()
            }
        }
    }
}

/// Reads a tree written by [`write_tree`] (or `git apply`) back into the model.
pub fn read_tree(root: &Path) -> Tree {
    let mut t = Tree::new();
    for e in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e
            .path()
            .strip_prefix(root)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let m = fs::symlink_metadata(e.path()).unwrap();
        if m.file_type().is_symlink() {
            let target = fs::read_link(e.path()).unwrap();
            t.insert(rel, Node::Link(target.as_os_str().as_bytes().to_vec()));
        } else if m.is_file() {
            t.insert(
                rel,
                Node::File {
                    data: fs::read(e.path()).unwrap(),
                    exec: m.mode() & 0o100 != 0,
                },
            );
        }
    }
    t
}

pub(super) fn clear_dir(root: &Path, keep_git: bool) {
    for e in fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        if keep_git && e.file_name() == ".git" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            fs::remove_dir_all(e.path()).unwrap();
        } else {
            fs::remove_file(e.path()).unwrap();
        }
    }
}
