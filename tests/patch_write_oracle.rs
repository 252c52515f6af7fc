//! Oracle tests for `patchbox::patch::write`.
//!
//! Each case builds an old and a new tree in temporary directories, walks both, writes the
//! patch with `write_file_diff` (one call per path, paths sorted by bytes like git) and then
//! lets real tools judge it:
//!
//! * `git apply --check` and `git apply` in a fresh repository holding a copy of the old tree;
//!   the result must equal the new tree exactly (set of paths, contents, exec bit, symlinks);
//! * GNU `patch -p1` on another copy, for cases without binaries or symlinks (contents only);
//! * `git diff --full-index --binary` between the same two trees: our output must be
//!   byte-identical, except inside binary sections (zlib output and git's choice of
//!   `delta` differ legitimately) and for cases marked as having a different but valid diff
//!   shape.
//!
//! git runs with an isolated configuration (`HOME` in a temporary directory, no system or
//! global config), so the user's settings cannot change the outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use patchbox::git::oid::blob_id_hex;
use patchbox::git::quote::quote_path;
use patchbox::patch::write::{is_binary, write_file_diff, Side};
use patchbox::RelPath;

// ---------------------------------------------------------------------------------------------
// Trees
// ---------------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, Eq)]
enum Entry {
    File { data: Vec<u8>, exec: bool },
    Link(Vec<u8>),
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |d: &[u8]| {
            let head: Vec<u8> = d.iter().copied().take(48).collect();
            format!("{} bytes {:?}", d.len(), String::from_utf8_lossy(&head))
        };
        match self {
            Entry::File { data, exec } => write!(f, "File(exec={exec}, {})", short(data)),
            Entry::Link(t) => write!(f, "Link({:?})", String::from_utf8_lossy(t)),
        }
    }
}

/// Path bytes (`/`-separated) to entry; the BTreeMap order is git's path order.
type Tree = BTreeMap<Vec<u8>, Entry>;

fn f(path: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> (Vec<u8>, Entry) {
    let data = data.as_ref().to_vec();
    (path.as_ref().to_vec(), Entry::File { data, exec: false })
}

fn x(path: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> (Vec<u8>, Entry) {
    let data = data.as_ref().to_vec();
    (path.as_ref().to_vec(), Entry::File { data, exec: true })
}

fn l(path: impl AsRef<[u8]>, target: impl AsRef<[u8]>) -> (Vec<u8>, Entry) {
    let target = target.as_ref().to_vec();
    (path.as_ref().to_vec(), Entry::Link(target))
}

fn tree(entries: impl IntoIterator<Item = (Vec<u8>, Entry)>) -> Tree {
    entries.into_iter().collect()
}

fn materialize(root: &Path, t: &Tree) {
    for (p, e) in t {
        let full = root.join(OsStr::from_bytes(p));
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        match e {
            Entry::File { data, exec } => {
                fs::write(&full, data).unwrap();
                let mode = if *exec { 0o755 } else { 0o644 };
                fs::set_permissions(&full, fs::Permissions::from_mode(mode)).unwrap();
            }
            Entry::Link(target) => symlink(OsStr::from_bytes(target), &full).unwrap(),
        }
    }
}

/// The test's own walker: regular files and symlinks (never followed), skipping `.git` at
/// the root. Directories are not entries (git does not track them).
fn walk(root: &Path) -> Tree {
    let mut t = Tree::new();
    walk_into(root, &[], &mut t);
    t
}

fn walk_into(dir: &Path, prefix: &[u8], t: &mut Tree) {
    for ent in fs::read_dir(dir).unwrap() {
        let ent = ent.unwrap();
        let name = ent.file_name();
        if prefix.is_empty() && name == ".git" {
            continue;
        }
        let mut rel = prefix.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name.as_bytes());
        let md = fs::symlink_metadata(ent.path()).unwrap();
        let ft = md.file_type();
        if ft.is_symlink() {
            let target = fs::read_link(ent.path()).unwrap();
            t.insert(rel, Entry::Link(target.as_os_str().as_bytes().to_vec()));
        } else if ft.is_dir() {
            walk_into(&ent.path(), &rel, t);
        } else if ft.is_file() {
            let data = fs::read(ent.path()).unwrap();
            let exec = md.permissions().mode() & 0o100 != 0;
            t.insert(rel, Entry::File { data, exec });
        } else {
            panic!("unexpected file type at {}", ent.path().display());
        }
    }
}

/// Describes how two trees differ, or `Ok` when they are equal.
fn compare(what: &str, got: &Tree, want: &Tree) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let mut msg = format!("{what}: trees differ\n");
    let paths: BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    for p in paths {
        let (g, w) = (got.get(p), want.get(p));
        if g != w {
            msg += &format!(
                "  {:?}: got {:?}, want {:?}\n",
                String::from_utf8_lossy(p),
                g,
                w
            );
        }
    }
    Err(msg)
}

/// Contents only (GNU patch does not promise modes): files as path -> data.
fn contents(t: &Tree) -> BTreeMap<Vec<u8>, Vec<u8>> {
    t.iter()
        .filter_map(|(p, e)| match e {
            Entry::File { data, .. } => Some((p.clone(), data.clone())),
            Entry::Link(_) => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Patch writing
// ---------------------------------------------------------------------------------------------

fn side<'a>(path: &'a RelPath, e: &'a Entry) -> Side<'a> {
    match e {
        Entry::File { data, exec } => Side {
            path,
            mode: if *exec { 0o100755 } else { 0o100644 },
            data,
        },
        Entry::Link(target) => Side {
            path,
            mode: 0o120000,
            data: target,
        },
    }
}

fn make_patch(old: &Tree, new: &Tree) -> Vec<u8> {
    let paths: BTreeSet<&Vec<u8>> = old.keys().chain(new.keys()).collect();
    let mut out = Vec::new();
    for p in paths {
        let rel = RelPath::from_bytes(p).unwrap();
        assert_eq!(rel.as_bytes(), &p[..]);
        let o = old.get(p).map(|e| side(&rel, e));
        let n = new.get(p).map(|e| side(&rel, e));
        write_file_diff(&mut out, o, n);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// External tools
// ---------------------------------------------------------------------------------------------

/// Runs git in `dir` with a configuration isolated from the machine's.
fn git(dir: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("LC_ALL", "C")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .stdin(Stdio::null())
        .output()
        .expect("git must be installed to run these tests")
}

fn git_ok(dir: &Path, home: &Path, args: &[&str]) -> Vec<u8> {
    let out = git(dir, home, args);
    assert!(
        out.status.success(),
        "git {args:?} failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn gnu_patch(dir: &Path, patch_file: &Path) -> Output {
    Command::new("patch")
        .args(["-p1", "--quiet", "--force", "-i"])
        .arg(patch_file)
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env_remove("POSIXLY_CORRECT")
        .env_remove("PATCH_GET")
        .env_remove("SIMPLE_BACKUP_SUFFIX")
        .env_remove("VERSION_CONTROL")
        .stdin(Stdio::null())
        .output()
        .expect("GNU patch must be installed to run these tests")
}

/// `git diff --full-index --binary` between the two trees, via two written trees.
fn git_reference_diff(old: &Tree, new: &Tree) -> Vec<u8> {
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    let h = home.path();
    git_ok(r, h, &["init", "-q"]);
    materialize(r, old);
    git_ok(r, h, &["add", "-A"]);
    let t1 = String::from_utf8(git_ok(r, h, &["write-tree"])).unwrap();
    for ent in fs::read_dir(r).unwrap() {
        let ent = ent.unwrap();
        if ent.file_name() == ".git" {
            continue;
        }
        if ent.file_type().unwrap().is_dir() {
            fs::remove_dir_all(ent.path()).unwrap();
        } else {
            fs::remove_file(ent.path()).unwrap();
        }
    }
    materialize(r, new);
    git_ok(r, h, &["add", "-A"]);
    let t2 = String::from_utf8(git_ok(r, h, &["write-tree"])).unwrap();
    git_ok(
        r,
        h,
        &[
            "diff",
            "--full-index",
            "--binary",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            t1.trim(),
            t2.trim(),
        ],
    )
}

/// Replaces the data of each binary section (`literal`/`delta` blocks) by a marker: the
/// compressed bytes depend on the zlib implementation and git may choose a delta.
fn mask_binary(patch: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut in_section = false;
    for line in patch.split(|&b| b == b'\n') {
        if line.starts_with(b"literal ") || line.starts_with(b"delta ") {
            in_section = true;
            out.push(b"<binary section>".to_vec());
        } else if in_section {
            if line.is_empty() {
                in_section = false;
                out.push(Vec::new());
            }
        } else {
            out.push(line.to_vec());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The oracle
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Opts {
    /// Compare byte for byte with `git diff` (binary data masked).
    git_exact: bool,
    /// Also apply with GNU patch (only done when the case has no binaries or symlinks).
    gnu_patch: bool,
}

const EXACT: Opts = Opts {
    git_exact: true,
    gnu_patch: true,
};

/// Runs every check for one case and returns the patch for extra assertions.
fn run_case(old_spec: &Tree, new_spec: &Tree, opts: Opts) -> Vec<u8> {
    let old_dir = tempfile::tempdir().unwrap();
    let new_dir = tempfile::tempdir().unwrap();
    materialize(old_dir.path(), old_spec);
    materialize(new_dir.path(), new_spec);
    let old = walk(old_dir.path());
    let new = walk(new_dir.path());
    compare("old tree as written", &old, old_spec).unwrap();
    compare("new tree as written", &new, new_spec).unwrap();

    let patch = make_patch(&old, &new);
    if old == new {
        assert!(patch.is_empty(), "identical trees must give an empty patch");
        return patch;
    }
    assert!(!patch.is_empty(), "different trees must give a patch");
    let show = String::from_utf8_lossy(&patch).into_owned();

    let scratch = tempfile::tempdir().unwrap();
    let patch_file = scratch.path().join("change.patch");
    fs::write(&patch_file, &patch).unwrap();
    let pf = patch_file.to_str().unwrap();

    // git apply in a repository holding a copy of the old tree.
    let repo = tempfile::tempdir().unwrap();
    let home = scratch.path();
    git_ok(repo.path(), home, &["init", "-q"]);
    materialize(repo.path(), &walk(old_dir.path()));
    let check = git(repo.path(), home, &["apply", "--check", pf]);
    assert!(
        check.status.success(),
        "git apply --check rejected the patch:\n{}\n--- patch ---\n{show}",
        String::from_utf8_lossy(&check.stderr)
    );
    let apply = git(repo.path(), home, &["apply", "--whitespace=nowarn", pf]);
    assert!(
        apply.status.success(),
        "git apply failed:\n{}\n--- patch ---\n{show}",
        String::from_utf8_lossy(&apply.stderr)
    );
    if let Err(e) = compare("after git apply", &walk(repo.path()), &new) {
        panic!("{e}--- patch ---\n{show}");
    }

    // GNU patch, for text-only cases without symlinks.
    let has_link = old
        .values()
        .chain(new.values())
        .any(|e| matches!(e, Entry::Link(_)));
    let has_binary = old.values().chain(new.values()).any(|e| match e {
        Entry::File { data, .. } => is_binary(data),
        Entry::Link(_) => false,
    });
    if opts.gnu_patch && !has_link && !has_binary {
        let pdir = tempfile::tempdir().unwrap();
        materialize(pdir.path(), &old);
        let out = gnu_patch(pdir.path(), &patch_file);
        assert!(
            out.status.success(),
            "GNU patch failed:\n{}{}\n--- patch ---\n{show}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let got = contents(&walk(pdir.path()));
        let want = contents(&new);
        if got != want {
            let as_tree = |m: &BTreeMap<Vec<u8>, Vec<u8>>| -> Tree {
                m.iter()
                    .map(|(p, d)| {
                        let e = Entry::File {
                            data: d.clone(),
                            exec: false,
                        };
                        (p.clone(), e)
                    })
                    .collect()
            };
            let e = compare("after GNU patch", &as_tree(&got), &as_tree(&want)).unwrap_err();
            panic!("{e}--- patch ---\n{show}");
        }
    }

    // Byte-for-byte against git's own output.
    if opts.git_exact {
        let reference = git_reference_diff(&old, &new);
        let (ours, theirs) = (mask_binary(&patch), mask_binary(&reference));
        if ours != theirs {
            panic!(
                "output differs from git diff\n--- ours ---\n{show}\n--- git ---\n{}",
                String::from_utf8_lossy(&reference)
            );
        }
    }
    patch
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    count(hay, needle) > 0
}

/// Numbered lines "1 line\n".."n line\n"; a leading digit keeps git from adding function
/// context to hunk headers, so exact comparison is possible.
fn numbered(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{i} line\n")).collect()
}

fn join(lines: &[String]) -> String {
    lines.concat()
}

/// Deterministic pseudo-random bytes (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Binary data: random bytes with a NUL at the start so git calls it binary.
    fn binary(&mut self, n: usize) -> Vec<u8> {
        let mut v: Vec<u8> = (0..n).map(|_| self.next() as u8).collect();
        if let Some(b) = v.first_mut() {
            *b = 0;
        }
        v
    }
}

// ---------------------------------------------------------------------------------------------
// Unit checks
// ---------------------------------------------------------------------------------------------

#[test]
fn blob_ids_match_git_hash_object() {
    assert_eq!(blob_id_hex(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    let home = tempfile::tempdir().unwrap();
    for data in [&b"hello\n"[..], b"", b"\0\x01binary\xff", b"no newline"] {
        let file = home.path().join("blob");
        fs::write(&file, data).unwrap();
        let out = git_ok(
            home.path(),
            home.path(),
            &["hash-object", "--no-filters", file.to_str().unwrap()],
        );
        assert_eq!(
            blob_id_hex(data),
            String::from_utf8(out).unwrap().trim(),
            "{data:?}"
        );
    }
    assert_eq!(
        blob_id_hex(b"hello\n"),
        "ce013625030ba8dba906f756967f9e9ca394464a"
    );
}

#[test]
fn quoting_and_binary_heuristic() {
    assert_eq!(quote_path("a/", b"plain/x.rs"), b"a/plain/x.rs");
    assert_eq!(
        quote_path("a/", "t\u{e9}st".as_bytes()),
        br#""a/t\303\251st""#
    );
    assert_eq!(
        quote_path("b/", b"q\"\\\t\n\x01\xff"),
        br#""b/q\"\\\t\n\001\377""#
    );
    assert!(is_binary(b"a\0b"));
    assert!(!is_binary(b"abc"));
    assert!(!is_binary(b""));
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

#[test]
fn identical_trees_give_empty_patch() {
    let t = tree([
        f("a.txt", "a\n"),
        x("run.sh", "#!/bin/sh\n"),
        l("ln", "a.txt"),
    ]);
    assert!(run_case(&t, &t, EXACT).is_empty());
}

#[test]
fn text_edit_in_middle() {
    let old = numbered(20);
    let mut new = old.clone();
    new[9] = "10 changed\n".into();
    let p = run_case(
        &tree([f("src/file.txt", join(&old)), f("other.txt", "same\n")]),
        &tree([f("src/file.txt", join(&new)), f("other.txt", "same\n")]),
        EXACT,
    );
    assert!(contains(&p, b"@@ -7,7 +7,7 @@\n"));
    assert_eq!(count(&p, b"diff --git "), 1);
}

#[test]
fn several_hunks_far_apart() {
    let old = numbered(120);
    let mut new = old.clone();
    new[4] = "5 changed\n".into();
    new.insert(60, "inserted\n".into());
    new.remove(100);
    new[115] = "end changed\n".into();
    let p = run_case(
        &tree([f("f.txt", join(&old))]),
        &tree([f("f.txt", join(&new))]),
        EXACT,
    );
    assert_eq!(count(&p, b"\n@@ "), 4);
}

#[test]
fn hunks_close_together_merge_like_git() {
    // Gaps of 5 and 6 unchanged lines merge into one hunk; 7 splits (context 3 each side).
    for (gap, hunks) in [(5usize, 1usize), (6, 1), (7, 2)] {
        let old = numbered(40);
        let mut new = old.clone();
        new[10] = "first change\n".into();
        new[10 + gap + 1] = "second change\n".into();
        let p = run_case(
            &tree([f("f.txt", join(&old))]),
            &tree([f("f.txt", join(&new))]),
            EXACT,
        );
        assert_eq!(count(&p, b"\n@@ "), hunks, "gap {gap}");
    }
}

#[test]
fn additions_in_new_nested_dirs() {
    let p = run_case(
        &tree([f("keep.txt", "keep\n")]),
        &tree([
            f("keep.txt", "keep\n"),
            f("a/b/c/deep.txt", "deep\nfile\n"),
            f("a/b/sibling.txt", "sib\n"),
            x("tools/bin/run", "#!/bin/sh\necho hi\n"),
        ]),
        EXACT,
    );
    assert_eq!(count(&p, b"new file mode 100644\n"), 2);
    assert_eq!(count(&p, b"new file mode 100755\n"), 1);
    assert!(contains(
        &p,
        b"index 0000000000000000000000000000000000000000.."
    ));
}

#[test]
fn deletion() {
    let p = run_case(
        &tree([f("gone.txt", "one\ntwo\nthree\n"), f("stay.txt", "s\n")]),
        &tree([f("stay.txt", "s\n")]),
        EXACT,
    );
    assert!(contains(&p, b"deleted file mode 100644\n"));
    assert!(contains(&p, b"+++ /dev/null\n@@ -1,3 +0,0 @@\n"));
}

#[test]
fn deletion_in_nested_dir() {
    run_case(
        &tree([
            f("d/e/f/only.txt", "only\n"),
            f("d/e/keep.txt", "keep\n"),
            x("d/e/g/run.sh", "#!/bin/sh\n"),
        ]),
        &tree([f("d/e/keep.txt", "keep\n")]),
        EXACT,
    );
}

#[test]
fn exec_bit_mode_only() {
    let p = run_case(
        &tree([f("on.sh", "#!/bin/sh\n"), x("off.sh", "#!/bin/sh\necho\n")]),
        &tree([x("on.sh", "#!/bin/sh\n"), f("off.sh", "#!/bin/sh\necho\n")]),
        EXACT,
    );
    assert!(contains(
        &p,
        b"diff --git a/on.sh b/on.sh\nold mode 100644\nnew mode 100755\n"
    ));
    assert!(contains(&p, b"old mode 100755\nnew mode 100644\n"));
    assert!(
        !contains(&p, b"index "),
        "mode-only changes have no index line"
    );
    assert!(!contains(&p, b"@@"));
}

#[test]
fn exec_bit_with_content() {
    let p = run_case(
        &tree([
            f("on.sh", "#!/bin/sh\nold\n"),
            x("off.sh", "#!/bin/sh\nold\n"),
        ]),
        &tree([
            x("on.sh", "#!/bin/sh\nnew\n"),
            f("off.sh", "#!/bin/sh\nnew\n"),
        ]),
        EXACT,
    );
    assert_eq!(count(&p, b"\n@@ "), 2);
    // With a mode change the index line carries no mode.
    assert!(!contains(&p, b" 100644\n--- "));
}

#[test]
fn symlink_add_delete_retarget() {
    let p = run_case(
        &tree([
            f("target.txt", "t\n"),
            l("old-link", "target.txt"),
            l("moving", "target.txt"),
        ]),
        &tree([
            f("target.txt", "t\n"),
            l("new-link", "target.txt"),
            l("moving", "elsewhere/../nowhere"),
            l("dir/dangling", "../../outside"),
        ]),
        EXACT,
    );
    assert!(contains(&p, b"new file mode 120000\n"));
    assert!(contains(&p, b"deleted file mode 120000\n"));
    assert!(contains(&p, b" 120000\n--- a/moving\n"));
    assert!(contains(&p, b"\\ No newline at end of file\n"));
}

#[test]
fn file_to_symlink_and_back() {
    let p = run_case(
        &tree([
            f("becomes-link", "I was a file\n"),
            l("becomes-file", "becomes-link"),
            x("exec-becomes-link", "#!/bin/sh\n"),
        ]),
        &tree([
            l("becomes-link", "somewhere"),
            f("becomes-file", "now a file\n"),
            l("exec-becomes-link", "becomes-file"),
        ]),
        EXACT,
    );
    // Each type change is a deletion followed by an addition of the same path.
    assert_eq!(count(&p, b"diff --git a/becomes-link b/becomes-link\n"), 2);
    let del = p
        .windows(b"deleted file mode 100644".len())
        .position(|w| w == b"deleted file mode 100644");
    let add = p
        .windows(b"new file mode 120000".len())
        .position(|w| w == b"new file mode 120000");
    assert!(del < add);
}

#[test]
fn binary_add_modify_delete() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Sizes chosen to hit: single line, sizes not multiple of 4, > 1 KiB (many 52-byte lines),
    // > 8000 bytes.
    let sizes = [1usize, 3, 5, 7, 51, 52, 53, 1021, 1500, 5003, 9001];
    let mut old = Vec::new();
    let mut new = Vec::new();
    for &n in &sizes {
        new.push(f(format!("add/{n}.bin"), rng.binary(n)));
        old.push(f(format!("del/{n}.bin"), rng.binary(n)));
        let before = rng.binary(n);
        let mut after = before.clone();
        let i = rng.below(n);
        after[i] ^= 0x5a;
        after.extend_from_slice(&rng.binary(1 + n % 5));
        old.push(f(format!("mod/{n}.bin"), before));
        new.push(f(format!("mod/{n}.bin"), after));
    }
    let p = run_case(&tree(old), &tree(new), EXACT);
    assert_eq!(count(&p, b"GIT binary patch\n"), 3 * sizes.len());
    // A deletion writes a forward `literal 0` and a reverse literal of the old content.
    assert!(contains(
        &p,
        b"GIT binary patch\nliteral 0\nHcmV?d00001\n\nliteral 1021\n"
    ));
    // Multi-line bodies: full lines start with 'z' (52 bytes).
    assert!(contains(&p, b"\nz"));
}

#[test]
fn binary_text_transitions_and_modes() {
    let mut rng = Rng(42);
    let bin = rng.binary(300);
    let bin2 = rng.binary(2000);
    run_case(
        &tree([
            f("text-to-bin", "plain\ntext\n"),
            f("bin-to-text", &bin),
            f("bin-mode-only", &bin2),
            f("bin-mode-and-content", &bin),
            f("bin-to-empty", &bin),
            f("empty-to-bin", ""),
        ]),
        &tree([
            f("text-to-bin", &bin2),
            f("bin-to-text", "now\ntext\n"),
            x("bin-mode-only", &bin2),
            x("bin-mode-and-content", &bin2),
            f("bin-to-empty", ""),
            f("empty-to-bin", &bin),
        ]),
        EXACT,
    );
}

#[test]
fn missing_final_newline() {
    let p = run_case(
        &tree([
            f("old-only", "a\nb\nc"),
            f("new-only", "a\nb\nc\n"),
            f("both-last-changes", "a\nb\nc"),
            f("both-context", "1\n2\n3\n4\n5\nend"),
            f("short", "x"),
        ]),
        &tree([
            f("old-only", "a\nb\nc\n"),
            f("new-only", "a\nb\nc"),
            f("both-last-changes", "a\nb\nC"),
            f("both-context", "1\n2\nthree\n4\n5\nend"),
            f("short", "y"),
        ]),
        EXACT,
    );
    // old-only 1, new-only 1, both-last-changes 2, both-context 1 (context line), short 2.
    assert_eq!(count(&p, b"\\ No newline at end of file\n"), 7);
}

#[test]
fn crlf_content() {
    run_case(
        &tree([
            f("dos.txt", "one\r\ntwo\r\nthree\r\nfour\r\n"),
            f("to-crlf.txt", "a\nb\n"),
            f("lone-cr.txt", "a\rb\nc\n"),
            f("crlf-no-eol.txt", "x\r\ny\r\n"),
        ]),
        &tree([
            f("dos.txt", "one\r\nTWO\r\nthree\r\nfour\r\nfive\r\n"),
            f("to-crlf.txt", "a\r\nb\r\n"),
            f("lone-cr.txt", "a\rB\nc\n"),
            f("crlf-no-eol.txt", "x\r\ny\r"),
        ]),
        EXACT,
    );
}

#[test]
fn empty_files() {
    let p = run_case(
        &tree([
            f("del-empty", ""),
            f("empty-to-text", ""),
            f("text-to-empty", "content\nhere\n"),
            f("empty-mode", ""),
        ]),
        &tree([
            f("add-empty", ""),
            x("add-empty-exec", ""),
            f("empty-to-text", "now\n"),
            f("text-to-empty", ""),
            x("empty-mode", ""),
        ]),
        EXACT,
    );
    assert!(contains(
        &p,
        b"diff --git a/add-empty b/add-empty\nnew file mode 100644\n\
          index 0000000000000000000000000000000000000000..e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\n\
          diff --git"
    ));
    assert!(contains(
        &p,
        b"deleted file mode 100644\n\
          index e69de29bb2d1d6434b8b29ae775ad8c2e48c5391..0000000000000000000000000000000000000000\n\
          diff --git"
    ));
    assert!(contains(&p, b"@@ -0,0 +1 @@\n+now\n"));
    assert!(contains(&p, b"@@ -1,2 +0,0 @@\n"));
}

#[test]
fn awkward_names() {
    let names: [&[u8]; 8] = [
        b"with space.txt",
        b"dir with space/inner name.txt",
        b"double\"quote.txt",
        b"back\\slash.txt",
        b"tab\there.txt",
        "caf\u{e9}/t\u{e9}st.txt".as_bytes(),
        b"raw\xffbyte.txt",
        b"new\nline.txt",
    ];
    let mut old = Vec::new();
    let mut new = Vec::new();
    for (i, n) in names.iter().enumerate() {
        // Modified, added and deleted variants of each name.
        let mut m = b"mod-".to_vec();
        m.extend_from_slice(n);
        old.push(f(&m, format!("{i}\nold\n")));
        new.push(f(&m, format!("{i}\nnew\n")));
        let mut a = b"add-".to_vec();
        a.extend_from_slice(n);
        new.push(f(&a, format!("{i} added\n")));
        let mut d = b"del-".to_vec();
        d.extend_from_slice(n);
        old.push(f(&d, format!("{i} deleted\n")));
    }
    let p = run_case(&tree(old), &tree(new), EXACT);
    assert!(contains(
        &p,
        b"diff --git \"a/mod-caf\\303\\251/t\\303\\251st.txt\" \"b/mod-caf\\303\\251/t\\303\\251st.txt\"\n"
    ));
    assert!(contains(&p, b"--- a/mod-with space.txt\t\n"));
    assert!(contains(&p, b"+++ b/add-with space.txt\t\n"));
    assert!(contains(&p, b"\"a/mod-raw\\377byte.txt\""));
    assert!(contains(&p, b"\"a/mod-tab\\there.txt\""));
}

#[test]
fn only_the_last_line_changes() {
    let old = numbered(30);
    let mut new = old.clone();
    new[29] = "30 last\n".into();
    let p = run_case(
        &tree([f("f.txt", join(&old))]),
        &tree([f("f.txt", join(&new))]),
        EXACT,
    );
    assert!(contains(&p, b"@@ -27,4 +27,4 @@\n"));
}

/// Large files (past the size whose blob ids are hashed on other threads) with one line
/// changed at the start, in the middle and at the end, in LF and CRLF, without a final
/// newline, and inside runs of identical lines (where the placement of a hunk is a choice:
/// git's must be the one made). Each is compared byte for byte with `git diff`.
#[test]
fn large_files_one_line_changes_match_git() {
    const N: usize = 150_000; // about 1.4 MB of numbered lines
    let lf = numbered(N);
    let crlf: Vec<String> = lf.iter().map(|l| l.replace('\n', "\r\n")).collect();
    let mut old = Vec::new();
    let mut new = Vec::new();
    for (name, lines) in [("lf", &lf), ("crlf", &crlf)] {
        let eol = if name == "lf" { "\n" } else { "\r\n" };
        for (at, what) in [(0, "start"), (N / 2, "middle"), (N - 1, "end")] {
            let mut edited = lines.clone();
            edited[at] = format!("{} changed{eol}", at + 1);
            let path = format!("{name}-{what}.txt");
            old.push(f(&path, join(lines)));
            new.push(f(&path, join(&edited)));
        }
        // A line appended, and one removed from the middle.
        let mut appended = lines.clone();
        appended.push(format!("appended{eol}"));
        old.push(f(format!("{name}-append.txt"), join(lines)));
        new.push(f(format!("{name}-append.txt"), join(&appended)));
        let mut removed = lines.clone();
        removed.remove(N / 3);
        old.push(f(format!("{name}-remove.txt"), join(lines)));
        new.push(f(format!("{name}-remove.txt"), join(&removed)));
    }
    // The newline at the end: dropped, added, and a line appended after a last line that
    // had none.
    let whole = join(&lf);
    let cut = whole.trim_end_matches('\n').to_string();
    old.push(f("eol-dropped.txt", &whole));
    new.push(f("eol-dropped.txt", &cut));
    old.push(f("eol-added.txt", &cut));
    new.push(f("eol-added.txt", &whole));
    old.push(f("append-after-no-eol.txt", &cut));
    new.push(f("append-after-no-eol.txt", format!("{whole}appended")));
    // A CRLF line losing its CR (the change is the line's last byte but one).
    let mut lost_cr = crlf.clone();
    lost_cr[N / 2] = format!("{} line\n", N / 2 + 1);
    old.push(f("crlf-lost-cr.txt", join(&crlf)));
    new.push(f("crlf-lost-cr.txt", join(&lost_cr)));
    // Runs of identical lines: one more or one fewer inside a run, a run of blank lines in
    // a numbered file, and a changed line right after a run.
    // (A leading digit keeps git from adding function context to the hunk headers.)
    let same = "0 same\n".repeat(N);
    old.push(f("same-insert.txt", &same));
    new.push(f("same-insert.txt", "0 same\n".repeat(N + 1)));
    old.push(f("same-delete.txt", &same));
    new.push(f("same-delete.txt", "0 same\n".repeat(N - 1)));
    let mut same_mid = lf.clone();
    same_mid.splice(
        N / 2..N / 2,
        std::iter::repeat_n("0 same\n".to_string(), 40),
    );
    let mut same_more = same_mid.clone();
    same_more.insert(N / 2 + 10, "0 same\n".into());
    old.push(f("same-run.txt", join(&same_mid)));
    new.push(f("same-run.txt", join(&same_more)));
    let mut blanks = lf.clone();
    blanks.splice(N / 2..N / 2, std::iter::repeat_n("\n".to_string(), 40));
    let mut after_run = blanks.clone();
    after_run[N / 2 + 40] = "after the run\n".into();
    old.push(f("after-run.txt", join(&blanks)));
    new.push(f("after-run.txt", join(&after_run)));
    let mut braces = lf.clone();
    for k in 0..6 {
        braces.insert(N / 2 + 2 * k, "}\n".into());
        braces.insert(N / 2 + 2 * k + 1, "\n".into());
    }
    let mut brace_added = braces.clone();
    brace_added.insert(N / 2 + 4, "}\n".into());
    brace_added.insert(N / 2 + 5, "\n".into());
    old.push(f("brace-pairs.txt", join(&braces)));
    new.push(f("brace-pairs.txt", join(&brace_added)));

    let p = run_case(&tree(old), &tree(new), EXACT);
    // One section per file, each small: only the changed region is in the patch.
    assert_eq!(count(&p, b"diff --git "), 19);
    assert!(p.len() < 20_000, "patch of {} bytes", p.len());
}

/// A blank line added inside a run of blank lines of a large file. git (2.14 on) places
/// such an insertion by its indent heuristic, which this writer does not implement: the
/// hunk stands elsewhere in the run than git's, so only the result of applying it is checked
/// (git apply, GNU patch), not the bytes.
#[test]
fn large_file_blank_line_into_a_blank_run_applies() {
    const N: usize = 150_000;
    let mut blanks = numbered(N);
    blanks.splice(N / 2..N / 2, std::iter::repeat_n("\n".to_string(), 40));
    let mut more_blanks = blanks.clone();
    more_blanks.insert(N / 2 + 10, "\n".into());
    let p = run_case(
        &tree([f("blank-run.txt", join(&blanks))]),
        &tree([f("blank-run.txt", join(&more_blanks))]),
        Opts {
            git_exact: false,
            gnu_patch: true,
        },
    );
    assert!(p.len() < 20_000, "patch of {} bytes", p.len());
}

#[test]
fn file_replaced_entirely() {
    let old = numbered(25);
    let new: Vec<String> = (1..=17).map(|i| format!("{i} other text\n")).collect();
    run_case(
        &tree([f("f.txt", join(&old))]),
        &tree([f("f.txt", join(&new))]),
        EXACT,
    );
}

#[test]
fn moved_block_and_large_rewrite() {
    let old = numbered(400);
    let mut moved = old.clone();
    let block: Vec<String> = moved.drain(50..90).collect();
    moved.splice(300..300, block);
    let rewritten: Vec<String> = (1..=350).map(|i| format!("{i} rewritten\n")).collect();
    let mut half = old.clone();
    for (i, line) in half.iter_mut().enumerate() {
        if i % 3 == 0 {
            *line = format!("{i} third\n");
        }
    }
    run_case(
        &tree([
            f("moved.txt", join(&old)),
            f("rewritten.txt", join(&old)),
            f("every-third.txt", join(&old)),
        ]),
        &tree([
            f("moved.txt", join(&moved)),
            f("rewritten.txt", join(&rewritten)),
            f("every-third.txt", join(&half)),
        ]),
        EXACT,
    );
}

#[test]
fn nul_beyond_the_binary_window_is_text() {
    // A NUL after the first 8000 bytes: git (and `is_binary`) still call this text, so the
    // hunks carry the NUL byte; both appliers must cope.
    let mut old = "0123456789abcdef\n".repeat(600).into_bytes();
    old.extend_from_slice(b"tail\0with nul\nend\n");
    assert!(!is_binary(&old));
    let mut new = old.clone();
    let n = new.len();
    new[n - 2] = b'D';
    let p = run_case(
        &tree([f("late-nul.txt", &old)]),
        &tree([f("late-nul.txt", &new)]),
        EXACT,
    );
    assert!(!contains(&p, b"GIT binary patch"));
}

#[test]
fn file_becomes_directory_and_back() {
    // git's path order puts `was-dir` (added file) before `was-dir/inner.txt` (deleted), so
    // GNU patch, which applies sections in order, meets a directory where it must create a
    // file; it cannot apply git's own diff of this case either. git apply handles it.
    let no_gnu = Opts {
        gnu_patch: false,
        ..EXACT
    };
    run_case(
        &tree([f("was-file", "file\n"), f("was-dir/inner.txt", "inner\n")]),
        &tree([
            f("was-file/inner.txt", "now inside\n"),
            f("was-dir", "flat\n"),
        ]),
        no_gnu,
    );
}

#[test]
fn random_text_edits() {
    // Many files with random line edits, CRLF lines, blank lines and missing final newlines.
    // The diff shape may differ from git's (both are valid), so no exact comparison here.
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let pool = [
        "alpha\n",
        "beta\n",
        "\n",
        "gamma\r\n",
        "delta\n",
        "}\n",
        "  x\n",
    ];
    let mut old = Vec::new();
    let mut new = Vec::new();
    for i in 0..40 {
        let n = rng.below(60);
        let mut a: Vec<String> = (0..n)
            .map(|_| pool[rng.below(pool.len())].to_string())
            .collect();
        let mut b = a.clone();
        for _ in 0..rng.below(8) {
            match rng.below(3) {
                0 if !b.is_empty() => {
                    let k = rng.below(b.len());
                    b.remove(k);
                }
                1 => {
                    let k = rng.below(b.len() + 1);
                    b.insert(k, format!("ins {}\n", rng.below(1000)));
                }
                _ if !b.is_empty() => {
                    let k = rng.below(b.len());
                    b[k] = pool[rng.below(pool.len())].to_string();
                }
                _ => {}
            }
        }
        for v in [&mut a, &mut b] {
            if rng.below(4) == 0 {
                if let Some(last) = v.last_mut() {
                    last.pop();
                }
            }
        }
        old.push(f(format!("r/{i}.txt"), join(&a)));
        new.push(f(format!("r/{i}.txt"), join(&b)));
    }
    let shape_may_differ = Opts {
        git_exact: false,
        ..EXACT
    };
    run_case(&tree(old), &tree(new), shape_may_differ);
}

#[test]
fn three_way_uses_the_index_lines() {
    // The repository's version differs from the patch's preimage right next to the hunk
    // (line 8 is in the context of the change to line 10), so a plain apply fails; `--3way`
    // finds the preimage blob through the `index` line and merges cleanly.
    let base = numbered(20);
    let mut theirs = base.clone();
    theirs[9] = "10 from patch\n".into();
    let mut ours = base.clone();
    ours[7] = "8 local edit\n".into();
    let mut merged = ours.clone();
    merged[9] = "10 from patch\n".into();

    let old = tree([f("f.txt", join(&base))]);
    let new = tree([f("f.txt", join(&theirs))]);
    let patch = make_patch(&old, &new);
    assert!(contains(
        &patch,
        format!(
            "index {}..{} 100644\n",
            blob_id_hex(join(&base).as_bytes()),
            blob_id_hex(join(&theirs).as_bytes())
        )
        .as_bytes()
    ));

    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let (r, h) = (repo.path(), home.path());
    let patch_file = home.path().join("p.patch");
    fs::write(&patch_file, &patch).unwrap();
    let pf = patch_file.to_str().unwrap();
    let commit = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"];

    git_ok(r, h, &["init", "-q"]);
    materialize(r, &old);
    git_ok(r, h, &["add", "-A"]);
    git_ok(r, h, &[&commit[..], &["commit", "-qm", "base"]].concat());
    fs::write(r.join("f.txt"), join(&ours)).unwrap();
    git_ok(r, h, &["add", "-A"]);
    git_ok(r, h, &[&commit[..], &["commit", "-qm", "local"]].concat());

    let plain = git(r, h, &["apply", "--check", pf]);
    assert!(!plain.status.success(), "plain apply should not match here");
    let three = git(r, h, &["apply", "--3way", pf]);
    assert!(
        three.status.success(),
        "git apply --3way failed:\n{}",
        String::from_utf8_lossy(&three.stderr)
    );
    compare(
        "after git apply --3way",
        &walk(r),
        &tree([f("f.txt", join(&merged))]),
    )
    .unwrap();

    // With a preimage id that is not in the repository, --3way has nothing to merge from.
    let bogus = String::from_utf8(patch.clone())
        .unwrap()
        .replace(&blob_id_hex(join(&base).as_bytes()), &"1".repeat(40));
    fs::write(&patch_file, bogus).unwrap();
    git_ok(r, h, &["checkout", "-q", "--", "."]);
    let fails = git(r, h, &["apply", "--3way", pf]);
    assert!(
        !fails.status.success(),
        "--3way must need the index line's blob"
    );
}

#[test]
fn oracle_detects_a_wrong_result() {
    // The comparison must be able to fail: applying old->new and comparing to a third tree.
    let old = tree([f("a.txt", "1\n2\n3\n"), x("run", "x\n")]);
    let new = tree([f("a.txt", "1\n2\nthree\n"), x("run", "x\n")]);
    let patch = make_patch(&old, &new);
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let patch_file = home.path().join("p.patch");
    fs::write(&patch_file, &patch).unwrap();
    git_ok(repo.path(), home.path(), &["init", "-q"]);
    materialize(repo.path(), &old);
    git_ok(
        repo.path(),
        home.path(),
        &["apply", patch_file.to_str().unwrap()],
    );
    let got = walk(repo.path());
    assert!(compare("ok", &got, &new).is_ok());
    let wrong_content = tree([f("a.txt", "1\n2\nTHREE\n"), x("run", "x\n")]);
    let wrong_mode = tree([f("a.txt", "1\n2\nthree\n"), f("run", "x\n")]);
    let wrong_set = tree([f("a.txt", "1\n2\nthree\n")]);
    for w in [wrong_content, wrong_mode, wrong_set] {
        assert!(compare("wrong", &got, &w).is_err());
    }
}
