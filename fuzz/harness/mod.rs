//! The structure-aware differential fuzzer of `patchbox::apply`, shared by the short form
//! (`tests/fuzz_apply.rs`) and the long form (`examples/fuzz_apply.rs`). See `fuzz/README.md`.
//!
//! One case: a project tree (text files with few distinct lines, binary files, symlinks,
//! executables, nested dirs, odd names), a patch (made by `git diff --binary` between that tree
//! and an edited copy, or by this crate's writer, or taken from the corpus), then 0–4
//! structure-aware mutations of the patch text, and sometimes local drift in the project.
//!
//! Each case is applied by patchbox (check mode, then for real, in `P/proj`, `P` being a
//! fingerprinted parent holding `outside/` and `sibling.txt`) and by `git apply` on a copy in
//! another directory. Invariants checked on every case: no panic, nothing outside `P/proj`
//! changed, a refusal (or `Err`, or nothing to do) leaves the project byte-identical (modes
//! and mtimes included), check mode writes nothing and predicts the real outcome. Then the
//! two results are compared and every disagreement gets a class (see [`Class`]).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use patchbox::apply::{apply_patch, ApplyOptions, ApplyReport, FileStatus, Outcome};
use patchbox::patch::write::{write_file_diff, Side};
use patchbox::RelPath;

/// Stands for the absolute path of the case's `outside/` directory in patches and symlink
/// targets; replaced when the case runs.
pub const OUTSIDE: &str = "@OUTSIDE@";

// ------------------------------------------------------------------------------------------
// Random numbers
// ------------------------------------------------------------------------------------------

/// SplitMix64: small, seedable, good enough for choosing mutations.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

// ------------------------------------------------------------------------------------------
// Tree model
// ------------------------------------------------------------------------------------------

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
const LINES: &[&str] = &["a", "b", "c", "x", "y", "{", "}", "", "same", "same"];
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

fn random_path(rng: &mut Rng) -> String {
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

fn subst_outside(bytes: &[u8], outside: &Path) -> Vec<u8> {
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

fn clear_dir(root: &Path, keep_git: bool) {
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

// ------------------------------------------------------------------------------------------
// Fingerprints
// ------------------------------------------------------------------------------------------

/// Per path: full mode, contents (a symlink's target), mtime. The root included.
pub type Exact = BTreeMap<Vec<u8>, (u32, Vec<u8>, i64, i64)>;

/// The exact fingerprint of everything under `root`, skipping the entries `skip` names (and
/// what is under them).
pub fn exact(root: &Path, skip: Option<&Path>) -> Exact {
    let mut out = BTreeMap::new();
    let walk = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| skip.is_none_or(|s| e.path() != s));
    for e in walk {
        let Ok(e) = e else { continue };
        let rel = e.path().strip_prefix(root).unwrap();
        let Ok(m) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        let content = if m.file_type().is_symlink() {
            fs::read_link(e.path())
                .map(|t| t.as_os_str().as_bytes().to_vec())
                .unwrap_or_default()
        } else if m.is_file() {
            fs::read(e.path()).unwrap_or_default()
        } else {
            Vec::new()
        };
        out.insert(
            rel.as_os_str().as_bytes().to_vec(),
            (m.mode(), content, m.mtime(), m.mtime_nsec()),
        );
    }
    out
}

/// What a patch can change, per path (directories included): type, exec bit, contents.
pub type View = BTreeMap<Vec<u8>, (char, bool, Vec<u8>)>;

/// The [`View`] of `root`; `outside` in symlink targets and file contents becomes `@OUTSIDE@`.
pub fn view(root: &Path, outside: &Path) -> View {
    exact(root, None)
        .into_iter()
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, (mode, content, _, _))| {
            let kind = match mode & 0o170000 {
                0o120000 => 'l',
                0o040000 => 'd',
                0o100000 => 'f',
                _ => '?',
            };
            let exec = kind == 'f' && mode & 0o100 != 0;
            // In file contents too: a patch's `@OUTSIDE@` line (a symlink's target written
            // as a regular file) is each copy's own outside directory.
            let content = replace_all(&content, outside.as_os_str().as_bytes(), OUTSIDE.as_bytes());
            (k, (kind, exec, content))
        })
        .collect()
}

/// The first difference between two views, as a short class word and the path.
fn view_diff(ours: &View, theirs: &View) -> (String, String) {
    let keys: BTreeSet<&Vec<u8>> = ours.keys().chain(theirs.keys()).collect();
    for k in keys {
        let what = match (ours.get(k), theirs.get(k)) {
            (Some(_), None) => "only in patchbox's result",
            (None, Some(_)) => "only in git's result",
            (Some(a), Some(b)) if a.0 != b.0 => "type differs",
            (Some(a), Some(b)) if a.1 != b.1 => "exec bit differs",
            (Some(a), Some(b)) if a.2 != b.2 => "content differs",
            _ => continue,
        };
        return (what.to_string(), String::from_utf8_lossy(k).into_owned());
    }
    ("equal".into(), String::new())
}

// ------------------------------------------------------------------------------------------
// git
// ------------------------------------------------------------------------------------------

/// `git` isolated from the user's configuration: the tests' own runner.
#[path = "../../tests/gitcmd/mod.rs"]
mod gitcmd;
pub use gitcmd::git_cmd;

fn git_ok(dir: &Path, home: &Path, args: &[&str]) -> Vec<u8> {
    let out = git_cmd(dir, home, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `git apply --binary` of `patch` in `dir` (not in a repository): (applied, stderr).
pub fn git_apply(dir: &Path, home: &Path, patch: &[u8]) -> (bool, String) {
    git_apply_args(dir, home, patch, &[])
}

/// [`git_apply`] with more options.
pub fn git_apply_args(dir: &Path, home: &Path, patch: &[u8], extra: &[&str]) -> (bool, String) {
    let mut args = vec!["apply", "--binary"];
    args.extend_from_slice(extra);
    args.push("-");
    let mut child = git_cmd(dir, home, &args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn git apply");
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(patch);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first `error:`/`fatal:` line of git's stderr with names and numbers taken out.
pub fn git_error_class(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: ") || l.starts_with("fatal: "))
        .unwrap_or_else(|| stderr.lines().next().unwrap_or(""));
    let msg = line.split_once(": ").map_or(line, |x| x.1);
    let msg = if msg.starts_with("patch failed") {
        "patch failed".to_string()
    } else if let Some(i) = msg.find("corrupt binary patch") {
        msg[i..i + "corrupt binary patch".len()].to_string()
    } else if msg.starts_with("new mode (") && msg.contains("does not match old mode") {
        "new mode of P does not match old mode".to_string()
    } else if msg.starts_with("path ") && msg.contains(" has been ") {
        format!(
            "path P has been {}",
            msg.rsplit(" has been ").next().unwrap_or("")
        )
    } else if let Some(i) = msg.find("invalid path") {
        msg[i..i + "invalid path".len()].to_string()
    } else if let Some(i) = msg.rfind(": ") {
        // "<path>: <what>"
        msg[i + 2..].to_string()
    } else {
        msg.to_string()
    };
    let mut out = String::new();
    let mut quote = false;
    for ch in msg.chars() {
        match ch {
            '\'' => {
                quote = !quote;
                if quote {
                    out.push_str("'P'");
                }
            }
            _ if quote => {}
            '0'..='9' => {
                if !out.ends_with('N') {
                    out.push('N')
                }
            }
            _ => out.push(ch),
        }
    }
    // Drop parenthesized object ids and line numbers: "(NbNceN…)".
    let mut res = String::new();
    let mut rest = out.trim();
    while let Some(i) = rest.find(" (") {
        let close = rest[i..].find(')').map(|c| i + c);
        match close {
            Some(c) if rest[i + 2..c].chars().all(|ch| ch.is_ascii_alphanumeric()) => {
                res.push_str(&rest[..i]);
                rest = &rest[c + 1..];
            }
            _ => {
                res.push_str(&rest[..i + 2]);
                rest = &rest[i + 2..];
            }
        }
    }
    res.push_str(rest);
    res
}

// ------------------------------------------------------------------------------------------
// Patches
// ------------------------------------------------------------------------------------------

/// A scratch repository for `git diff`.
pub struct DiffRepo {
    pub repo: PathBuf,
    pub home: PathBuf,
}

const DIFF_ARGS: &[&[&str]] = &[
    &[],
    &["-M"],
    &["-M", "-U1"],
    &["-C", "--find-copies-harder"],
    &["--no-renames"],
    &["-U0"],
    &["-U5", "-M"],
    &["--full-index", "-M"],
    &["-B", "-M"],
    &["--diff-algorithm=patience"],
    &["--src-prefix=s/", "--dst-prefix=t/"],
    &["--text"],
];

impl DiffRepo {
    pub fn new(scratch: &Path) -> DiffRepo {
        let repo = scratch.join("repo");
        let home = scratch.join("home");
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&home).unwrap();
        git_ok(&repo, &home, &["init", "-q", "."]);
        DiffRepo { repo, home }
    }

    /// `git diff --cached --binary <args>` from `base` to `head`.
    pub fn diff(&self, base: &Tree, head: &Tree, args: &[&str]) -> Vec<u8> {
        let (r, h) = (&self.repo, &self.home);
        let outside = Path::new("/nonexistent-patchbox-fuzz/outside");
        clear_dir(r, true);
        write_tree(r, base, outside);
        git_ok(r, h, &["add", "-A"]);
        let tree = git_ok(r, h, &["write-tree"]);
        let tree = String::from_utf8(tree).unwrap().trim().to_string();
        clear_dir(r, true);
        write_tree(r, head, outside);
        git_ok(r, h, &["add", "-A"]);
        let mut a = vec!["diff", "--cached", "--binary"];
        a.extend_from_slice(args);
        a.push(&tree);
        let out = git_ok(r, h, &a);
        // Put back the placeholder in absolute link targets.
        replace_all(&out, outside.as_os_str().as_bytes(), OUTSIDE.as_bytes())
    }
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

fn side<'a>(p: &'a RelPath, n: &'a Node) -> Side<'a> {
    match n {
        Node::File { data, exec } => Side {
            path: p,
            mode: if *exec { 0o100755 } else { 0o100644 },
            data,
        },
        Node::Link(t) => Side {
            path: p,
            mode: 0o120000,
            data: t,
        },
    }
}

/// The patch `patchbox::patch::write` writes for `base` → `head`, in path order.
pub fn writer_patch(base: &Tree, head: &Tree) -> Vec<u8> {
    let keys: BTreeSet<&String> = base.keys().chain(head.keys()).collect();
    let mut out = Vec::new();
    // Deletions first, so that a file → directory swap applies in order.
    for pass in 0..2 {
        for k in &keys {
            let Ok(p) = RelPath::new(k.as_str()) else {
                continue;
            };
            let (old, new) = (base.get(*k), head.get(*k));
            let deletion = new.is_none();
            if (pass == 0) != deletion {
                continue;
            }
            write_file_diff(&mut out, old.map(|n| side(&p, n)), new.map(|n| side(&p, n)));
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// Mutations of patch text
// ------------------------------------------------------------------------------------------

const MANGLED: &[&str] = &[
    "../outside/secret.txt",
    "d/../../outside/secret.txt",
    "d//b.txt",
    "./a.txt",
    "d/./b.txt",
    ".git/config",
    ".git/hooks/pre-commit",
    ".GIT/config",
    ".Git/HEAD",
    ".git./config",
    ".git /config",
    "git~1/config",
    "GIT~1/config",
    "d/.git/x",
    ".gitmodules",
    "@OUTSIDE@/secret.txt",
    "@OUTSIDE@/new.txt",
    "l/x",
    "l/secret.txt",
    "a.txt/x",
    "",
    "/",
    ".",
    "..",
];
/// Whole tokens (prefix included), quoted the way git quotes.
const QUOTED: &[&str] = &[
    "\"a/q\\tx\"",
    "\"a/\\303\\274.txt\"",
    "\"a/..\\057outside\\057secret.txt\"",
    "\"a/.\\147it/config\"",
    "\"a/x\\000y\"",
    "\"a/bad\\qescape\"",
    "\"a/unterminated",
    "\"a/quo\\\"te\"",
    "\"a/back\\\\slash\"",
    "\"a/nl\\nname\"",
    "\"/abs\"",
    "\"\"",
];
const MODES: &[&str] = &[
    "100644", "100755", "120000", "160000", "040000", "100600", "644", "0", "777777", "abc",
    "100644 ", "1006440",
];
const SPLICE: &[&str] = &[
    "GIT binary patch\n",
    "Binary files a/a.txt and b/a.txt differ\n",
    "index 0000000..1111111 100644\n",
    "index e69de29..e69de29\n",
    "new file mode 100644\n",
    "deleted file mode 100644\n",
    "--- /dev/null\n",
    "+++ /dev/null\n",
    "@@ -0,0 +1 @@\n",
    "@@ -1 +0,0 @@\n",
    "-- \n",
    "2.39.5\n",
    "dissimilarity index 100%\n",
    "similarity index 100%\n",
    "\\ No newline at end of file\n",
    "literal 0\n",
    "delta 0\n",
    "\n",
    "diff --git a/a.txt b/a.txt\n",
    "diff --git a/c b/c\n",
];

fn split_lines(p: &[u8]) -> Vec<Vec<u8>> {
    p.split_inclusive(|&b| b == b'\n')
        .map(|l| l.to_vec())
        .collect()
}

fn is_hunk_line(l: &[u8]) -> bool {
    matches!(l.first(), Some(b' ' | b'-' | b'+'))
        && !l.starts_with(b"---")
        && !l.starts_with(b"+++")
}

fn random_name(rng: &mut Rng) -> String {
    if rng.chance(1, 3) {
        random_path(rng)
    } else {
        rng.pick(MANGLED).to_string()
    }
}

/// A header line naming a path, with the path replaced.
fn mangle_header(rng: &mut Rng, line: &[u8], name: &str, quoted: Option<&str>) -> Option<Vec<u8>> {
    let s = String::from_utf8_lossy(line);
    let nl = if s.ends_with("\r\n") { "\r\n" } else { "\n" };
    let ab = |pre: &str| {
        quoted
            .map(|q| q.replacen("a/", pre, 1))
            .unwrap_or_else(|| format!("{pre}{name}"))
    };
    let out = if s.starts_with("diff --git ") {
        if rng.chance(1, 3) {
            format!("diff --git {} {}{nl}", ab("a/"), ab("b/"))
        } else {
            let other = random_name(rng);
            format!("diff --git a/{other} {}{nl}", ab("b/"))
        }
    } else if s.starts_with("--- ") && !s.starts_with("--- /dev/null") {
        format!("--- {}{nl}", ab("a/"))
    } else if s.starts_with("+++ ") && !s.starts_with("+++ /dev/null") {
        format!("+++ {}{nl}", ab("b/"))
    } else {
        let kw = ["rename from ", "rename to ", "copy from ", "copy to "]
            .into_iter()
            .find(|k| s.starts_with(k))?;
        let tok = quoted
            .map(|q| q.replacen("a/", "", 1))
            .unwrap_or_else(|| name.to_string());
        format!("{kw}{tok}{nl}")
    };
    Some(out.into_bytes())
}

/// Applies one random structure-aware mutation to `lines`; returns its name.
pub fn mutate_once(rng: &mut Rng, lines: &mut Vec<Vec<u8>>) -> &'static str {
    let n = lines.len();
    let idx =
        |rng: &mut Rng, pred: &dyn Fn(&[u8]) -> bool, lines: &Vec<Vec<u8>>| -> Option<usize> {
            let c: Vec<usize> = (0..lines.len()).filter(|&i| pred(&lines[i])).collect();
            if c.is_empty() {
                None
            } else {
                Some(*rng.pick(&c))
            }
        };
    match rng.below(20) {
        0 if n > 0 => {
            lines.remove(rng.below(n));
            "delete line"
        }
        1 if n > 0 => {
            let i = rng.below(n);
            let l = lines[i].clone();
            lines.insert(i, l);
            "duplicate line"
        }
        2 if n > 1 => {
            let i = rng.below(n - 1);
            lines.swap(i, i + 1);
            "swap lines"
        }
        3 => match idx(rng, &is_hunk_line, lines) {
            Some(i) => {
                lines[i][0] = *rng.pick(b" -+");
                "flip hunk line kind"
            }
            None => "none",
        },
        4 => match idx(rng, &is_hunk_line, lines) {
            Some(i) => {
                let keep = lines[i][0];
                let nl: &[u8] = if lines[i].ends_with(b"\r\n") {
                    b"\r\n"
                } else {
                    b"\n"
                };
                let mut l = vec![keep];
                l.extend_from_slice(rng.pick(LINES).as_bytes());
                l.extend_from_slice(nl);
                lines[i] = l;
                "change hunk line text"
            }
            None => "none",
        },
        5 | 6 => match idx(rng, &|l| l.starts_with(b"@@ "), lines) {
            Some(i) => {
                let s = String::from_utf8_lossy(&lines[i]).into_owned();
                let mut nums: Vec<(usize, usize)> = Vec::new();
                let b = s.as_bytes();
                let mut j = 0;
                while j < b.len() {
                    if b[j].is_ascii_digit() {
                        let st = j;
                        while j < b.len() && b[j].is_ascii_digit() {
                            j += 1;
                        }
                        nums.push((st, j));
                    } else {
                        j += 1;
                    }
                }
                if nums.is_empty() {
                    return "none";
                }
                let (st, en) = *rng.pick(&nums);
                let v: u64 = s[st..en].parse().unwrap_or(0);
                let nv = match rng.below(7) {
                    0 => v.saturating_add(1).to_string(),
                    1 => v.saturating_sub(1).to_string(),
                    2 => "0".into(),
                    3 => "99999".into(),
                    4 => "18446744073709551615".into(),
                    5 => "18446744073709551616".into(),
                    _ => (v + 2 + rng.below(5) as u64).to_string(),
                };
                let mut out = format!("{}{}{}", &s[..st], nv, &s[en..]);
                if rng.chance(1, 5) {
                    out = out.replacen(",", "", 1);
                }
                lines[i] = out.into_bytes();
                "hunk header number"
            }
            None => "none",
        },
        7 | 8 => {
            let header = |l: &[u8]| {
                l.starts_with(b"diff --git ")
                    || l.starts_with(b"--- ")
                    || l.starts_with(b"+++ ")
                    || l.starts_with(b"rename ")
                    || l.starts_with(b"copy ")
            };
            let name = random_name(rng);
            let quoted = if rng.chance(1, 4) {
                Some(*rng.pick(QUOTED))
            } else {
                None
            };
            if rng.chance(1, 2) {
                // every header of one file section
                let Some(start) = idx(
                    rng,
                    &|l| l.starts_with(b"diff --git ") || l.starts_with(b"--- "),
                    lines,
                ) else {
                    return "none";
                };
                let mut i = start;
                while i < lines.len()
                    && !is_hunk_line(&lines[i])
                    && !lines[i].starts_with(b"@@")
                    && (i == start || !lines[i].starts_with(b"diff --git "))
                {
                    if header(&lines[i]) {
                        if let Some(l) = mangle_header(rng, &lines[i], &name, quoted) {
                            lines[i] = l;
                        }
                    }
                    i += 1;
                }
                "mangle section paths"
            } else {
                match idx(rng, &header, lines) {
                    Some(i) => {
                        if let Some(l) = mangle_header(rng, &lines[i], &name, quoted) {
                            lines[i] = l;
                        }
                        "mangle one path"
                    }
                    None => "none",
                }
            }
        }
        9 => {
            let m = rng.pick(MODES);
            match idx(
                rng,
                &|l| {
                    l.ends_with(b"mode 100644\n")
                        || l.ends_with(b"mode 100755\n")
                        || l.ends_with(b"mode 120000\n")
                        || l.starts_with(b"index ")
                },
                lines,
            ) {
                Some(i) if rng.chance(2, 3) => {
                    let s = String::from_utf8_lossy(&lines[i]).into_owned();
                    let cut = s.trim_end().rfind(' ').unwrap_or(0);
                    lines[i] = format!("{} {m}\n", &s[..cut]).into_bytes();
                    "change mode"
                }
                _ => match idx(rng, &|l| l.starts_with(b"diff --git "), lines) {
                    Some(i) => {
                        let m2 = rng.pick(MODES);
                        let ins = match rng.below(3) {
                            0 => format!("old mode {m}\nnew mode {m2}\n"),
                            1 => format!("new file mode {m}\n"),
                            _ => format!("deleted file mode {m}\n"),
                        };
                        lines.insert(i + 1, ins.into_bytes());
                        "insert mode lines"
                    }
                    None => "none",
                },
            }
        }
        10 => match idx(rng, &|l| l.starts_with(b"diff --git "), lines) {
            Some(i) => {
                let kind = if rng.chance(1, 2) { "rename" } else { "copy" };
                let (x, y) = (random_name(rng), random_name(rng));
                let sim = rng.below(102);
                lines.insert(
                    i + 1,
                    format!("similarity index {sim}%\n{kind} from {x}\n{kind} to {y}\n")
                        .into_bytes(),
                );
                "insert rename/copy"
            }
            None => "none",
        },
        11 => {
            let mut all = lines.concat();
            all.truncate(rng.below(all.len() + 1));
            *lines = split_lines(&all);
            "truncate"
        }
        12 => {
            if let Some(i) = idx(rng, &|l| l.starts_with(b"\\ "), lines) {
                if rng.chance(1, 2) {
                    lines.remove(i);
                    return "remove no-newline marker";
                }
            }
            match idx(rng, &is_hunk_line, lines) {
                Some(i) => {
                    lines.insert(i + 1, b"\\ No newline at end of file\n".to_vec());
                    "insert no-newline marker"
                }
                None => "none",
            }
        }
        13 | 14 => {
            let is_bin_hdr = |l: &[u8]| l.starts_with(b"literal ") || l.starts_with(b"delta ");
            match idx(rng, &is_bin_hdr, lines) {
                Some(i) => {
                    match rng.below(5) {
                        0 => {
                            let s = String::from_utf8_lossy(&lines[i]).into_owned();
                            let (kw, num) =
                                s.trim_end().split_once(' ').unwrap_or(("literal", "0"));
                            let v: u64 = num.parse().unwrap_or(0);
                            let nv = *rng.pick(&[v + 1, v.saturating_sub(1), 0, 1 << 40, u64::MAX]);
                            lines[i] = format!("{kw} {nv}\n").into_bytes();
                        }
                        1 => {
                            let s = String::from_utf8_lossy(&lines[i]).into_owned();
                            let swapped = if s.starts_with("literal") {
                                s.replacen("literal", "delta", 1)
                            } else {
                                s.replacen("delta", "literal", 1)
                            };
                            lines[i] = swapped.into_bytes();
                        }
                        2 if i + 1 < lines.len() => {
                            let l = &mut lines[i + 1];
                            if l.len() > 2 {
                                let j = 1 + rng.below(l.len() - 2);
                                l[j] = *rng.pick(b"0Az~{!|#aZ_");
                            }
                        }
                        3 if i + 1 < lines.len() => {
                            let l = &mut lines[i + 1];
                            if !l.is_empty() {
                                l[0] = *rng.pick(b"AaZzB0~");
                            }
                        }
                        _ if i + 1 < lines.len() => {
                            lines.remove(i + 1);
                        }
                        _ => {}
                    }
                    "binary corruption"
                }
                None => "none",
            }
        }
        15 => {
            let starts: Vec<usize> = (0..n)
                .filter(|&i| lines[i].starts_with(b"diff --git "))
                .collect();
            if starts.is_empty() {
                return "none";
            }
            let k = rng.below(starts.len());
            let (s, e) = (starts[k], starts.get(k + 1).copied().unwrap_or(n));
            let sec: Vec<Vec<u8>> = lines[s..e].to_vec();
            let at = if rng.chance(1, 2) { e } else { n };
            for (j, l) in sec.into_iter().enumerate() {
                lines.insert(at + j, l);
            }
            "duplicate section"
        }
        16 => {
            if rng.chance(1, 2) {
                for l in lines.iter_mut() {
                    if l.ends_with(b"\n") && !l.ends_with(b"\r\n") {
                        l.pop();
                        l.extend_from_slice(b"\r\n");
                    }
                }
                "CRLF everywhere"
            } else if n > 0 {
                let l = &mut lines[rng.below(n)];
                if l.ends_with(b"\n") && !l.ends_with(b"\r\n") {
                    l.pop();
                    l.extend_from_slice(b"\r\n");
                }
                "CRLF one line"
            } else {
                "none"
            }
        }
        17 if n > 0 => {
            let i = rng.below(n);
            if !lines[i].is_empty() {
                let j = rng.below(lines[i].len());
                lines[i][j] = *rng.pick(b"\0\n \t+-@\"\\/\xff~1");
            }
            "byte flip"
        }
        18 => {
            let i = rng.below(n + 1);
            lines.insert(i, rng.pick(SPLICE).as_bytes().to_vec());
            "splice line"
        }
        _ => match idx(rng, &|l| l.starts_with(b"index "), lines) {
            Some(i) => {
                let s = String::from_utf8_lossy(&lines[i]).into_owned();
                let forms = [
                    "0000000",
                    "e69de29",
                    "ffffff",
                    "zzzz",
                    "",
                    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
                ];
                let a = rng.pick(&forms);
                let b = rng.pick(&forms);
                let rest = s
                    .trim_end()
                    .split(' ')
                    .nth(2)
                    .map(|m| format!(" {m}"))
                    .unwrap_or_default();
                lines[i] = format!("index {a}..{b}{rest}\n").into_bytes();
                "index line"
            }
            None => "none",
        },
    }
}

/// 0–4 mutations (none for about a third of the cases); returns the names.
pub fn mutate(rng: &mut Rng, patch: &[u8]) -> (Vec<u8>, Vec<&'static str>) {
    let mut lines = split_lines(patch);
    let count = match rng.below(9) {
        0..=2 => 0,
        3..=5 => 1,
        6 | 7 => 2,
        _ => 3 + rng.below(2),
    };
    let mut names = Vec::new();
    for _ in 0..count {
        names.push(mutate_once(rng, &mut lines));
    }
    (lines.concat(), names)
}

// ------------------------------------------------------------------------------------------
// Cases
// ------------------------------------------------------------------------------------------

/// One input: the project, optionally the pre-images for a 3-way merge, the patch.
#[derive(Clone, Debug)]
pub struct Case {
    pub project: Tree,
    pub preimages: Option<Tree>,
    pub conflict_markers: bool,
    pub patch: Vec<u8>,
    /// How it was made (source, mutations): for the report.
    pub origin: String,
}

const SETUP: &str = "==== fuzz-case: setup ====\n";
const PREIMAGES: &str = "==== fuzz-case: preimages ====\n";
const PATCH: &str = "==== fuzz-case: patch ====\n";

impl Case {
    /// The case file: comment lines, the project and the pre-images as creation patches
    /// (this crate's writer; `git apply` rebuilds them), then the patch, verbatim.
    pub fn to_file(&self, comment: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for l in comment.lines() {
            out.extend_from_slice(format!("# {l}\n").as_bytes());
        }
        let opts = if self.conflict_markers {
            "conflict_markers"
        } else {
            ""
        };
        out.extend_from_slice(format!("# options: {opts}\n").as_bytes());
        out.extend_from_slice(SETUP.as_bytes());
        out.extend_from_slice(&writer_patch(&Tree::new(), &self.project));
        if let Some(p) = &self.preimages {
            out.extend_from_slice(PREIMAGES.as_bytes());
            out.extend_from_slice(&writer_patch(&Tree::new(), p));
        }
        out.extend_from_slice(PATCH.as_bytes());
        out.extend_from_slice(&self.patch);
        out
    }

    /// Reads a case file; the trees are rebuilt with `git apply` in `scratch`.
    pub fn from_file(bytes: &[u8], scratch: &Path, origin: &str) -> Case {
        let find = |m: &str| bytes.windows(m.len()).position(|w| w == m.as_bytes());
        let setup_at = find(SETUP).expect("case file without setup marker");
        let patch_at = find(PATCH).expect("case file without patch marker");
        let pre_at = find(PREIMAGES).filter(|&p| p < patch_at);
        let head = String::from_utf8_lossy(&bytes[..setup_at]);
        let conflict_markers = head
            .lines()
            .any(|l| l.starts_with("# options:") && l.contains("conflict_markers"));
        let setup = &bytes[setup_at + SETUP.len()..pre_at.unwrap_or(patch_at)];
        let build = |text: &[u8], name: &str| -> Tree {
            let dir = scratch.join(name);
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            if !text.is_empty() {
                let home = scratch.join("home");
                fs::create_dir_all(&home).unwrap();
                let (ok, err) = git_apply(&dir, &home, text);
                assert!(ok, "{origin}: git apply of the {name} failed: {err}");
            }
            let t = read_tree(&dir);
            fs::remove_dir_all(&dir).unwrap();
            t
        };
        let project = build(setup, "setup");
        let preimages = pre_at.map(|p| build(&bytes[p + PREIMAGES.len()..patch_at], "preimages"));
        Case {
            project,
            preimages,
            conflict_markers,
            patch: bytes[patch_at + PATCH.len()..].to_vec(),
            origin: origin.to_string(),
        }
    }
}

/// Loads `dir/*.case`, sorted by name.
pub fn load_corpus(dir: &Path, scratch: &Path) -> Vec<(String, Case)> {
    let mut names: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "case"))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = fs::read(&p).unwrap();
            let case = Case::from_file(&bytes, scratch, &name);
            (name, case)
        })
        .collect()
}

/// Makes a case from `seed`: a tree, an edited copy, a patch between them (git's or this
/// crate's), or a corpus case; then mutations and sometimes drift.
pub fn generate(seed: u64, repo: &DiffRepo, corpus: &[(String, Case)]) -> Case {
    let mut rng = Rng::new(seed);
    let (mut project, patch, mut origin, base) = if !corpus.is_empty() && rng.chance(1, 5) {
        let (name, c) = rng.pick(corpus);
        (
            c.project.clone(),
            c.patch.clone(),
            format!("corpus {name}"),
            c.preimages.clone(),
        )
    } else {
        let base = random_tree(&mut rng);
        let head = edit_tree(&mut rng, &base);
        if rng.chance(1, 4) {
            let p = writer_patch(&base, &head);
            (base.clone(), p, "patchbox writer".to_string(), Some(base))
        } else {
            let args = rng.pick(DIFF_ARGS);
            let p = repo.diff(&base, &head, args);
            (
                base.clone(),
                p,
                format!("git diff --binary {}", args.join(" ")),
                Some(base),
            )
        }
    };
    let mut preimages = None;
    if rng.chance(1, 5) {
        project = drift_tree(&mut rng, &project);
        origin.push_str(" + drift");
        if rng.chance(1, 2) {
            preimages = base;
            origin.push_str(" + preimages");
        }
    }
    origin = format!("seed {seed}: {origin}");
    let conflict_markers = rng.chance(1, 12);
    if conflict_markers {
        origin.push_str(" + conflict markers");
    }
    let (patch, muts) = mutate(&mut rng, &patch);
    if !muts.is_empty() {
        origin.push_str(&format!("; mutations: {}", muts.join(", ")));
    }
    Case {
        project,
        preimages,
        conflict_markers,
        patch,
        origin,
    }
}

// ------------------------------------------------------------------------------------------
// Running a case
// ------------------------------------------------------------------------------------------

/// What one case showed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Both applied with identical results, or both refused.
    Agree,
    /// Both wrote nothing: patchbox found nothing to do, git refused (a re-applied patch).
    AgreeNoop,
    /// git applied, patchbox wrote nothing (refused, conflict, error). Allowed: stricter.
    Stricter(String),
    /// git refused, patchbox wrote: justified in DIFFERENCES.md, or a bug.
    GitRefusedPatchboxWrote(String),
    /// Both applied, results differ: justified in DIFFERENCES.md, or a bug.
    BothAppliedDiffer(String),
    /// Invariant violations: always bugs.
    Panic(String),
    OutsideWrite(String),
    ChangedAfterRefusal(String),
    CheckWrote(String),
    CheckMismatch(String),
}

impl Class {
    /// The key used in DIFFERENCES.md and in the figures.
    pub fn key(&self) -> String {
        match self {
            Class::Agree => "agree".into(),
            Class::AgreeNoop => "agree: patchbox no-op, git refused".into(),
            Class::Stricter(k) => format!("stricter: {k}"),
            Class::GitRefusedPatchboxWrote(k) => format!("git-refused/patchbox-wrote: {k}"),
            Class::BothAppliedDiffer(k) => format!("both-applied/differ: {k}"),
            Class::Panic(k) => format!("PANIC: {k}"),
            Class::OutsideWrite(k) => format!("OUTSIDE-WRITE: {k}"),
            Class::ChangedAfterRefusal(k) => format!("CHANGED-AFTER-REFUSAL: {k}"),
            Class::CheckWrote(k) => format!("CHECK-WROTE: {k}"),
            Class::CheckMismatch(k) => format!("check-mismatch: {k}"),
        }
    }
    /// Needs an entry in DIFFERENCES.md (justified or known bug) to be accepted.
    pub fn needs_listing(&self) -> bool {
        !matches!(self, Class::Agree | Class::AgreeNoop | Class::Stricter(_))
    }
    pub fn is_invariant_violation(&self) -> bool {
        matches!(
            self,
            Class::Panic(_)
                | Class::OutsideWrite(_)
                | Class::ChangedAfterRefusal(_)
                | Class::CheckWrote(_)
        )
    }
}

/// A worker's scratch space: the diff repository and the case directories.
pub struct Worker {
    pub scratch: tempfile::TempDir,
    pub repo: DiffRepo,
    count: u64,
}

impl Default for Worker {
    fn default() -> Self {
        Self::new()
    }
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".into()
    }
}

fn make_parent(dir: &Path, project: &Tree) -> PathBuf {
    fs::create_dir_all(dir.join("outside/sub")).unwrap();
    fs::write(dir.join("outside/secret.txt"), b"secret\n").unwrap();
    fs::write(dir.join("outside/sub/x"), b"x\n").unwrap();
    fs::write(dir.join("sibling.txt"), b"sibling\n").unwrap();
    let proj = dir.join("proj");
    fs::create_dir(&proj).unwrap();
    write_tree(&proj, project, &dir.join("outside"));
    proj
}

/// Normalizes a detail/error text into a class key: digits out, quoted names out, first
/// clause only.
fn normalize(s: &str) -> String {
    let s = s.lines().next().unwrap_or("");
    let mut out = String::new();
    let mut q = None;
    for ch in s.chars() {
        match (q, ch) {
            (None, '\'' | '`' | '"') => {
                q = Some(ch);
                out.push_str("'P'");
            }
            (Some(c), _) if c == ch => q = None,
            (Some(_), _) => {}
            (None, '0'..='9') => {
                if !out.ends_with('N') {
                    out.push('N')
                }
            }
            (None, _) => out.push(ch),
        }
    }
    let out = out
        .split(['(', ';'])
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    out.chars().take(90).collect()
}

fn report_key(r: &ApplyReport) -> String {
    match r
        .files
        .iter()
        .find(|f| matches!(f.status, FileStatus::Refused | FileStatus::Conflict))
    {
        Some(f) => format!("{}: {}", f.status, normalize(&f.detail)),
        None => format!("{:?}", r.outcome),
    }
}

fn error_key(e: &patchbox::Error) -> String {
    let dbg = format!("{e:?}");
    let variant: String = dbg.chars().take_while(|c| c.is_alphanumeric()).collect();
    format!("Err {variant}: {}", normalize(&e.to_string()))
}

impl Worker {
    pub fn new() -> Worker {
        let scratch = tempfile::Builder::new()
            .prefix("patchbox-fuzz-")
            .tempdir()
            .unwrap();
        let repo = DiffRepo::new(scratch.path());
        Worker {
            scratch,
            repo,
            count: 0,
        }
    }

    /// Runs `case`; returns its class and a one-line explanation.
    pub fn run(&mut self, case: &Case) -> (Class, String) {
        self.count += 1;
        let root = self.scratch.path().join(format!("case-{}", self.count));
        let ours_parent = root.join("P");
        let theirs_parent = root.join("Q");
        let proj = make_parent(&ours_parent, &case.project);
        let theirs = make_parent(&theirs_parent, &case.project);
        let outside_p = ours_parent.join("outside");
        let mut opts = ApplyOptions {
            conflict_markers: case.conflict_markers,
            ..ApplyOptions::default()
        };
        if let Some(pre) = &case.preimages {
            let d = ours_parent.join("pre");
            fs::create_dir(&d).unwrap();
            write_tree(&d, pre, &outside_p);
            opts.preimages = Some(d);
        }
        let patch_ours = subst_outside(&case.patch, &outside_p);
        let patch_theirs = subst_outside(&case.patch, &theirs_parent.join("outside"));
        let mut result = self.run_in(
            &ours_parent,
            &proj,
            &patch_ours,
            &opts,
            &theirs,
            &patch_theirs,
        );
        if let Class::BothAppliedDiffer(what) = &mut result.0 {
            // A cut "\ No newline" marker: patchbox honours any "\ " line, git keeps the newline.
            let short_marker = case
                .patch
                .split(|&b| b == b'\n')
                .any(|l| l.starts_with(b"\\") && l.len() < b"\\ No newline at end of file".len());
            if short_marker && what.as_str() == "content differs" {
                what.push_str(" (short no-newline marker)");
            }
            // Zero-context hunks: git without --unidiff-zero anchors them at the file's end.
            let again_parent = root.join("R");
            let again = make_parent(&again_parent, &case.project);
            let patch_again = subst_outside(&case.patch, &again_parent.join("outside"));
            let home = self.scratch.path().join("home");
            let (ok, _) = git_apply_args(&again, &home, &patch_again, &["--unidiff-zero"]);
            if ok && view(&again, &again_parent.join("outside")) == view(&proj, &outside_p) {
                what.push_str(" (same result with --unidiff-zero)");
            }
        }
        let _ = make_writable(&root);
        let _ = fs::remove_dir_all(&root);
        result
    }

    fn run_in(
        &mut self,
        parent: &Path,
        proj: &Path,
        patch: &[u8],
        opts: &ApplyOptions,
        theirs: &Path,
        patch_theirs: &[u8],
    ) -> (Class, String) {
        let outside_before = exact(parent, Some(proj));
        let proj_before = exact(proj, None);
        let outside_changed = |when: &str| -> Option<(Class, String)> {
            let now = exact(parent, Some(proj));
            (now != outside_before).then(|| {
                let (what, path) = exact_diff(&outside_before, &now);
                (
                    Class::OutsideWrite(format!("{when}: {what}")),
                    format!("outside the project: {path}"),
                )
            })
        };

        // Check mode: writes nothing, predicts the outcome.
        let check_opts = ApplyOptions {
            check: true,
            ..opts.clone()
        };
        let checked = catch_unwind(AssertUnwindSafe(|| apply_patch(proj, patch, &check_opts)));
        let checked = match checked {
            Err(e) => {
                let t = panic_text(&e);
                return (Class::Panic(format!("check: {}", normalize(&t))), t);
            }
            Ok(r) => r,
        };
        if let Some(v) = outside_changed("check") {
            return v;
        }
        if exact(proj, None) != proj_before {
            let (what, path) = exact_diff(&proj_before, &exact(proj, None));
            return (Class::CheckWrote(what), path);
        }

        // For real.
        let applied = catch_unwind(AssertUnwindSafe(|| apply_patch(proj, patch, opts)));
        let applied = match applied {
            Err(e) => {
                let t = panic_text(&e);
                return (Class::Panic(format!("apply: {}", normalize(&t))), t);
            }
            Ok(r) => r,
        };
        if let Some(v) = outside_changed("apply") {
            return v;
        }
        let proj_after = exact(proj, None);
        let wrote = matches!(&applied, Ok(r) if r.wrote());
        if !wrote && proj_after != proj_before {
            let (what, path) = exact_diff(&proj_before, &proj_after);
            let how = match &applied {
                Ok(r) => format!("{:?}", r.outcome),
                Err(e) => error_key(e),
            };
            return (Class::ChangedAfterRefusal(format!("{how}: {what}")), path);
        }
        let out_of = |r: &patchbox::Result<ApplyReport>| match r {
            Ok(r) => format!("{:?}", r.outcome),
            Err(e) => error_key(e),
        };
        let (co, ao) = (out_of(&checked), out_of(&applied));
        let check_mismatch = (co != ao).then(|| {
            (
                Class::CheckMismatch(format!("check {co}, apply {ao}")),
                String::new(),
            )
        });

        // git apply on the other copy.
        let home = self.scratch.path().join("home");
        let (git_applied, stderr) = git_apply(theirs, &home, patch_theirs);

        let pb_key = match &applied {
            Ok(r) => report_key(r),
            Err(e) => error_key(e),
        };
        let class = match (wrote, git_applied) {
            (true, true) => {
                let ours = view(proj, &parent.join("outside"));
                let theirs_view = view(theirs, &theirs.parent().unwrap().join("outside"));
                let (what, path) = view_diff(&ours, &theirs_view);
                if what == "equal" {
                    (Class::Agree, String::new())
                } else {
                    // git wrote a file `dev/null` (a `/dev/null` name it took for a file's):
                    // the first difference may be elsewhere (the directory it left behind).
                    let git_wrote_dev_null = !ours.contains_key(b"dev/null".as_slice())
                        && theirs_view.contains_key(b"dev/null".as_slice());
                    let what = if path == "dev" || path.starts_with("dev/") || git_wrote_dev_null {
                        format!("{what} (git wrote dev/null)")
                    } else if stderr.contains("error: ") {
                        format!(
                            "{what} (git exit 0 with error: {})",
                            git_error_class(&stderr)
                        )
                    } else {
                        what
                    };
                    (Class::BothAppliedDiffer(what), path)
                }
            }
            (false, false) => match &applied {
                Ok(r) if r.outcome == Outcome::AlreadyApplied => (Class::AgreeNoop, String::new()),
                _ => (Class::Agree, String::new()),
            },
            (false, true) => (Class::Stricter(pb_key), String::new()),
            (true, false) => {
                let r = applied.as_ref().unwrap();
                let mut k = format!("git: {}", git_error_class(&stderr));
                // git's hunks failed only on files patchbox found already patched (the
                // project drifted to the patch's result): patchbox's idempotence.
                let failed: Vec<&str> = stderr
                    .lines()
                    .filter_map(|l| l.strip_prefix("error: patch failed: "))
                    .filter_map(|l| l.rsplit_once(':').map(|x| x.0))
                    .collect();
                let already = !failed.is_empty()
                    && failed.iter().all(|p| {
                        r.files.iter().any(|f| {
                            // A rename or copy whose contents are already the result is
                            // "Applied" (the file still moves), its detail says so.
                            let named = f.path.to_string() == *p
                                || f.old_path.as_ref().is_some_and(|o| o.to_string() == *p);
                            // (Its blob id is the `index` line's new id, or the hunks' new
                            // side is there: the planner's `How::Already` details.)
                            named
                                && (f.status == FileStatus::AlreadyApplied
                                    || f.detail.contains("already present")
                                    || f.detail.contains("already match")
                                    || f.detail.contains("already equals"))
                        })
                    });
                if k == "git: patch failed" && already {
                    k.push_str(" + already applied");
                } else if k == "git: patch failed" {
                    // Zero-context hunks: git wants --unidiff-zero for them.
                    let (ok, _) = git_apply_args(theirs, &home, patch_theirs, &["--unidiff-zero"]);
                    let same = ok && {
                        let o = view(proj, &parent.join("outside"));
                        o == view(theirs, &theirs.parent().unwrap().join("outside"))
                    };
                    if same {
                        k.push_str(" (same result with --unidiff-zero)");
                    }
                }
                if r.outcome == Outcome::AppliedWithConflicts {
                    k.push_str(" + conflict markers");
                } else if r.files.iter().any(|f| f.status == FileStatus::Merged) {
                    k.push_str(" + merged");
                }
                (Class::GitRefusedPatchboxWrote(k), stderr.trim().to_string())
            }
        };
        match check_mismatch {
            Some(m)
                if class.0 == Class::Agree
                    || matches!(class.0, Class::Stricter(_) | Class::AgreeNoop) =>
            {
                m
            }
            _ => class,
        }
    }
}

fn make_writable(root: &Path) -> std::io::Result<()> {
    for e in walkdir::WalkDir::new(root).into_iter().flatten() {
        let m = fs::symlink_metadata(e.path())?;
        if m.is_dir() {
            let _ = fs::set_permissions(e.path(), fs::Permissions::from_mode(0o755));
        }
    }
    Ok(())
}

fn exact_diff(a: &Exact, b: &Exact) -> (String, String) {
    let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let what = match (a.get(k), b.get(k)) {
            (Some(_), None) => "removed",
            (None, Some(_)) => "created",
            (Some(x), Some(y)) if x.0 != y.0 => "mode changed",
            (Some(x), Some(y)) if x.1 != y.1 => "content changed",
            (Some(x), Some(y)) if x != y => "mtime changed",
            _ => continue,
        };
        return (what.to_string(), String::from_utf8_lossy(k).into_owned());
    }
    ("equal".into(), String::new())
}

// ------------------------------------------------------------------------------------------
// The list of differences, the figures
// ------------------------------------------------------------------------------------------

/// The keys listed in DIFFERENCES.md: `- \`key\`` lines under `## Justified…` and
/// `## Known bugs…` headings.
#[derive(Default, Debug)]
pub struct Listed {
    pub justified: BTreeSet<String>,
    pub bugs: BTreeSet<String>,
}

pub fn read_listed(path: &Path) -> Listed {
    let mut l = Listed::default();
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut section = 0;
    for line in text.lines() {
        if line.starts_with("## ") {
            let h = line.to_lowercase();
            section = if h.contains("justified") {
                1
            } else if h.contains("bug") {
                2
            } else {
                0
            };
            continue;
        }
        if let Some(rest) = line.strip_prefix("- `") {
            if let Some(end) = rest.find('`') {
                let key = rest[..end].to_string();
                match section {
                    1 => l.justified.insert(key),
                    2 => l.bugs.insert(key),
                    _ => false,
                };
            }
        }
    }
    l
}

impl Listed {
    pub fn status(&self, c: &Class) -> &'static str {
        let k = c.key();
        if !c.needs_listing() {
            "ok"
        } else if self.justified.contains(&k) {
            "justified"
        } else if self.bugs.contains(&k) {
            "known bug"
        } else {
            "UNLISTED"
        }
    }
}

/// Per class key: the class, its count, its smallest case and why.
pub type ClassCounts = BTreeMap<String, (Class, u64, Option<(Case, String)>)>;

/// Counts per class, with the smallest reproducer of each.
#[derive(Default)]
pub struct Stats {
    pub cases: u64,
    pub classes: ClassCounts,
}

impl Stats {
    pub fn add(&mut self, case: &Case, class: Class, why: String) {
        self.cases += 1;
        let e = self.classes.entry(class.key()).or_insert((class, 0, None));
        e.1 += 1;
        if e.0 != Class::Agree && e.0 != Class::AgreeNoop {
            let smaller =
                e.2.as_ref()
                    .is_none_or(|(c, _)| case.patch.len() < c.patch.len());
            if smaller {
                e.2 = Some((case.clone(), why));
            }
        }
    }

    pub fn count(&self, pred: impl Fn(&Class) -> bool) -> u64 {
        self.classes
            .values()
            .filter(|(c, _, _)| pred(c))
            .map(|(_, n, _)| n)
            .sum()
    }

    /// The figures, one class a line.
    pub fn summary(&self, listed: &Listed) -> String {
        let mut s = String::new();
        let inv = |c: &Class| c.is_invariant_violation();
        s.push_str(&format!(
            "cases: {}\npanics: {}\noutside writes: {}\nchanged after refusal: {}\ncheck mode wrote: {}\n",
            self.cases,
            self.count(|c| matches!(c, Class::Panic(_))),
            self.count(|c| matches!(c, Class::OutsideWrite(_))),
            self.count(|c| matches!(c, Class::ChangedAfterRefusal(_))),
            self.count(|c| matches!(c, Class::CheckWrote(_))),
        ));
        s.push_str(&format!(
            "agreements: {}\ninvariant violations: {}\nunlisted differences: {}\nclasses:\n",
            self.count(|c| matches!(c, Class::Agree | Class::AgreeNoop)),
            self.count(inv),
            self.unlisted(listed).len(),
        ));
        for (k, (c, n, _)) in &self.classes {
            s.push_str(&format!("  {n:>7}  [{}] {k}\n", listed.status(c)));
        }
        s
    }

    pub fn unlisted(&self, listed: &Listed) -> Vec<String> {
        self.classes
            .iter()
            .filter(|(_, (c, _, _))| listed.status(c) == "UNLISTED")
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Writes the smallest reproducer of each class that is not an agreement into `dir`.
    pub fn write_reproducers(&self, dir: &Path, listed: &Listed) {
        fs::create_dir_all(dir).unwrap();
        for (i, (k, (c, n, r))) in self.classes.iter().enumerate() {
            let Some((case, why)) = r else { continue };
            let slug: String = k
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() {
                        ch.to_ascii_lowercase()
                    } else {
                        '-'
                    }
                })
                .collect();
            let slug: String = slug
                .split('-')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("-");
            let slug: String = slug.chars().take(60).collect();
            let comment = format!(
                "class: {k}\nstatus: {}\nseen: {n} times\norigin: {}\nwhy: {}",
                listed.status(c),
                case.origin,
                why.lines().next().unwrap_or("")
            );
            fs::write(
                dir.join(format!("{i:03}-{slug}.case")),
                case.to_file(&comment),
            )
            .unwrap();
        }
    }
}
