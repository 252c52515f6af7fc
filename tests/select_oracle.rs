//! `select_project` against git itself: for each tricky repository the selected set must equal
//! what `git ls-files -z --cached --others --exclude-standard` lists (restricted to paths that
//! exist as files or symlinks). git runs with HOME / XDG_CONFIG_HOME in the test's temp dir and
//! GIT_CONFIG_NOSYSTEM=1; `select_project_with` gets the same locations through `SelectOptions`,
//! so the process environment is never changed (tests run in parallel threads).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use patchbox::git::ignore::IgnoreRules;
use patchbox::git::index::read_index;
use patchbox::git::repo::SelectOptions;
use patchbox::tree::select::{select_project_with, Kind, Selection};
use patchbox::{Error, RelPath};

struct Env {
    _tmp: tempfile::TempDir,
    /// Canonical temp root (also the git ceiling).
    root: PathBuf,
    home: PathBuf,
    xdg: Option<PathBuf>,
    /// The main repository / project.
    repo: PathBuf,
}

impl Env {
    /// A temp dir with `home/` and, when `with_xdg`, `xdg/` as XDG_CONFIG_HOME; `repo/`
    /// initialised as a git repository when `init`.
    fn new(with_xdg: bool, init: bool) -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        fs::create_dir(&home).unwrap();
        let xdg = with_xdg.then(|| root.join("xdg"));
        if let Some(x) = &xdg {
            fs::create_dir(x).unwrap();
        }
        let repo = root.join("repo");
        fs::create_dir(&repo).unwrap();
        let env = Env {
            _tmp: tmp,
            root,
            home,
            xdg,
            repo,
        };
        if init {
            env.git(&env.repo, &["init", "-q", "-b", "main"]);
        }
        env
    }

    fn cmd(&self, dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CEILING_DIRECTORIES", &self.root)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .env("LC_ALL", "C");
        if let Some(x) = &self.xdg {
            c.env("XDG_CONFIG_HOME", x);
        }
        c
    }

    /// Runs git, asserting success; returns stdout.
    fn git(&self, dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = self.cmd(dir, args).stdin(Stdio::null()).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    fn opts(&self) -> SelectOptions {
        SelectOptions {
            home: Some(self.home.clone()),
            xdg_config_home: self.xdg.clone(),
            ceiling_dirs: vec![self.root.clone()],
            ..Default::default()
        }
    }

    fn select(&self, project: &Path, exclude: &[PathBuf]) -> Selection {
        select_project_with(project, exclude, &self.opts()).unwrap()
    }
}

fn write(path: &Path, content: &str) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(path, content).unwrap();
}

fn files(root: &Path, paths: &[&str]) {
    for p in paths {
        write(&root.join(p), p);
    }
}

fn split_z(out: &[u8]) -> Vec<Vec<u8>> {
    out.split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn show(set: &BTreeSet<Vec<u8>>) -> Vec<String> {
    set.iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// True if `rel` exists under `root` as a file or symlink reached through real directories
/// only (git treats a path beyond a symlink as absent).
fn exists_as_file(root: &Path, rel: &[u8]) -> bool {
    let mut cur = root.to_path_buf();
    let comps: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
    for (i, c) in comps.iter().enumerate() {
        cur.push(OsStr::from_bytes(c));
        let Ok(m) = fs::symlink_metadata(&cur) else {
            return false;
        };
        let last = i + 1 == comps.len();
        if !last && !m.is_dir() {
            return false;
        }
        if last {
            return m.is_file() || m.file_type().is_symlink();
        }
    }
    false
}

struct Oracle {
    /// Existing files and symlinks git lists.
    files: BTreeSet<Vec<u8>>,
    /// Paths `--cached` lists (tracked).
    cached: BTreeSet<Vec<u8>>,
    /// Untracked directories git shows as `dir/` (nested repositories).
    nested: BTreeSet<Vec<u8>>,
}

fn oracle(env: &Env, project: &Path) -> Oracle {
    let all = split_z(&env.git(
        project,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    ));
    let cached: BTreeSet<Vec<u8>> = split_z(&env.git(project, &["ls-files", "-z", "--cached"]))
        .into_iter()
        .collect();
    let mut files = BTreeSet::new();
    let mut nested = BTreeSet::new();
    for p in all {
        if let Some(d) = p.strip_suffix(b"/") {
            nested.insert(d.to_vec());
        } else if exists_as_file(project, &p) {
            files.insert(p);
        }
    }
    Oracle {
        files,
        cached,
        nested,
    }
}

/// Selects `project` and checks it against git; returns the selection for further checks.
fn check(env: &Env, project: &Path, exclude: &[PathBuf]) -> Selection {
    let sel = env.select(project, exclude);
    let want = oracle(env, project);
    let got: BTreeSet<Vec<u8>> = sel
        .entries
        .iter()
        .map(|e| e.rel.as_bytes().to_vec())
        .collect();
    let missing: BTreeSet<_> = want.files.difference(&got).cloned().collect();
    let extra: BTreeSet<_> = got.difference(&want.files).cloned().collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "selection differs from git ls-files\n  missing: {:?}\n  extra: {:?}",
        show(&missing),
        show(&extra)
    );
    // Sorted by bytes, no duplicates.
    for w in sel.entries.windows(2) {
        assert!(w[0].rel.as_bytes() < w[1].rel.as_bytes());
    }
    let mut index: Option<Vec<patchbox::git::index::IndexEntry>> = None;
    for e in &sel.entries {
        let m = fs::symlink_metadata(project.join(e.rel.as_path())).unwrap();
        match e.kind {
            Kind::Symlink => assert!(m.file_type().is_symlink(), "{}", e.rel),
            Kind::File { executable } => {
                assert!(m.is_file(), "{}", e.rel);
                assert_eq!(executable, m.permissions().mode() & 0o100 != 0, "{}", e.rel);
            }
        }
        let tracked = want.cached.contains(e.rel.as_bytes());
        assert_eq!(e.index.is_some(), tracked, "tracked status of {}", e.rel);
        if let (Some(ix), Some(git)) = (&e.index, &sel.git) {
            let mut full = git
                .prefix
                .as_ref()
                .map(|p| {
                    let mut v = p.as_bytes().to_vec();
                    v.push(b'/');
                    v
                })
                .unwrap_or_default();
            full.extend_from_slice(e.rel.as_bytes());
            // The selection drops the entry's own copy of the path; it must still be the
            // index entry of this path.
            assert!(ix.path.is_empty());
            let from_index = index
                .get_or_insert_with(|| patchbox::git::index::read_index(&git.index_file).unwrap())
                .iter()
                .filter(|x| x.path == full)
                .map(|x| (x.oid, x.mode))
                .collect::<Vec<_>>();
            assert!(from_index.contains(&(ix.oid, ix.mode)), "{}", e.rel);
        }
    }
    let nested: BTreeSet<Vec<u8>> = sel
        .skipped
        .iter()
        .filter(|s| s.reason == "nested repository")
        .map(|s| s.rel.as_bytes().to_vec())
        .collect();
    assert_eq!(show(&nested), show(&want.nested), "nested repositories");
    sel
}

fn skipped(sel: &Selection) -> Vec<(String, &'static str)> {
    sel.skipped
        .iter()
        .map(|s| (s.rel.to_string(), s.reason))
        .collect()
}

fn names(sel: &Selection) -> Vec<String> {
    sel.entries.iter().map(|e| e.rel.to_string()).collect()
}

/// The pattern zoo shared by several tests.
fn tricky_repo(env: &Env) {
    let r = &env.repo;
    write(
        &r.join(".gitignore"),
        "\
# comment
*.log
/anchored
**/tmp
dir/**
!dir/keep.txt
*.o
!important.o
build/
ign/
!ign/reinclude.txt
deep/*/x
*.{a,b}
[abc].cls
\\#hash
\\!bang
trail   
escaped\\ 
only-dir/
a/**/z
[[:digit:]]*.num
br\\[ack
r[a-c]nge
m[]]x
q/**/deep/**/leaf
",
    );
    write(
        &r.join("sub/.gitignore"),
        "!keep.log\nlocal\n/sub-anchored\n",
    );
    write(&r.join("sub/inner/.gitignore"), "!*.o\n*.txt\n");
    files(
        r,
        &[
            "root.txt",
            "x.log",
            "sub/keep.log",
            "sub/other.log",
            "sub/deeper/keep.log",
            "anchored",
            "sub/anchored",
            "tmp/t1",
            "sub/tmp/t2",
            "sub/tmpx",
            "dir/a",
            "dir/keep.txt",
            "dir/nested/b",
            "other/dir/c",
            "a.o",
            "important.o",
            "sub/important.o",
            "sub/inner/c.o",
            "sub/inner/c.txt",
            "build/out.bin",
            "build/tracked.txt",
            "sub/build/y",
            "ign/reinclude.txt",
            "ign/plain",
            "deep/q/x",
            "deep/q/r/x",
            "deep/x",
            "z.{a,b}",
            "z.a",
            "a.cls",
            "d.cls",
            "#hash",
            "!bang",
            "trail",
            "escaped ",
            "escaped",
            "only-dir/f",
            "sub/only-dir",
            "a/z",
            "a/b/c/z",
            "a/zz",
            "sub/local",
            "sub/x/local",
            "sub/sub-anchored",
            "sub/x/sub-anchored",
            "with space/file name.txt",
            "7.num",
            "x7.num",
            "br[ack",
            "brack",
            "rbnge",
            "rdnge",
            "m]x",
            "mx",
            "q/deep/leaf",
            "q/1/deep/2/3/leaf",
            "q/1/deep/2/3/leafy",
            "ünïcødé/fïlé.txt",
        ],
    );
    // A non-UTF-8 file name.
    fs::write(r.join(OsStr::from_bytes(b"raw-\xff.bin")), "x").unwrap();
    fs::set_permissions(r.join("root.txt"), fs::Permissions::from_mode(0o755)).unwrap();
    // Empty dirs are never listed.
    fs::create_dir_all(r.join("empty/deeper")).unwrap();
    env.git(r, &["add", "-A"]);
    // Tracked although ignored: inside an ignored dir, and a plain ignored file.
    env.git(r, &["add", "-f", "build/tracked.txt", "x.log"]);
    env.git(r, &["commit", "-q", "-m", "init"]);
    // Untracked files appearing after the commit.
    files(
        r,
        &["new.txt", "build/new.txt", "new.log", "sub/new/keep.log"],
    );
}

#[test]
fn patterns_match_git() {
    let env = Env::new(true, true);
    tricky_repo(&env);
    let sel = check(&env, &env.repo, &[]);
    let n = names(&sel);
    // Spot checks, so a git oracle bug cannot hide a regression.
    for want in [
        "build/tracked.txt",
        "x.log",
        "sub/keep.log",
        "dir/keep.txt",
        "z.a",
    ] {
        assert!(n.contains(&want.to_string()), "{want} missing: {n:?}");
    }
    for not in [
        "build/out.bin",
        "build/new.txt",
        "ign/reinclude.txt",
        "new.log",
        "a.o",
        "z.{a,b}",
    ] {
        assert!(!n.contains(&not.to_string()), "{not} present");
    }
    let tracked = sel
        .entries
        .iter()
        .find(|e| e.rel.as_bytes() == b"build/tracked.txt")
        .unwrap();
    assert!(tracked.index.as_ref().is_some_and(|i| i.mode == 0o100644));
    let root = sel
        .entries
        .iter()
        .find(|e| e.rel.as_bytes() == b"root.txt")
        .unwrap();
    assert_eq!(root.kind, Kind::File { executable: true });
    assert!(sel.skipped.is_empty(), "{:?}", skipped(&sel));
}

#[test]
fn symlinks_fifos_and_special_names() {
    let env = Env::new(true, true);
    let r = &env.repo;
    files(r, &["real/file", "a b/c d", "ça/été"]);
    symlink("real", r.join("to-dir")).unwrap();
    symlink("does/not/exist", r.join("dangling")).unwrap();
    symlink("real/file", r.join("to-file")).unwrap();
    write(&r.join(".gitignore"), "real-ignored/\n");
    files(r, &["real-ignored/f"]);
    symlink("real-ignored", r.join("link-to-ignored")).unwrap();
    env.git(r, &["add", "-A"]);
    env.git(r, &["commit", "-q", "-m", "x"]);
    let fifo = r.join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let sel = check(&env, r, &[]);
    let kind = |n: &str| {
        sel.entries
            .iter()
            .find(|e| e.rel.to_string() == n)
            .map(|e| e.kind)
    };
    assert_eq!(kind("to-dir"), Some(Kind::Symlink));
    assert_eq!(kind("dangling"), Some(Kind::Symlink));
    assert_eq!(kind("link-to-ignored"), Some(Kind::Symlink));
    assert_eq!(kind("to-dir/file"), None, "symlink was followed");
    assert_eq!(skipped(&sel), [("pipe".to_string(), "fifo")]);
}

#[test]
fn deleted_and_unstaged_files() {
    let env = Env::new(true, true);
    let r = &env.repo;
    files(
        r,
        &["keep", "gone", "uncached", "dir/gone-too", "typechange"],
    );
    env.git(r, &["add", "-A"]);
    env.git(r, &["commit", "-q", "-m", "x"]);
    fs::remove_file(r.join("gone")).unwrap();
    fs::remove_dir_all(r.join("dir")).unwrap();
    env.git(r, &["rm", "-q", "--cached", "uncached"]);
    // A tracked file replaced by a directory.
    fs::remove_file(r.join("typechange")).unwrap();
    files(r, &["typechange/inner"]);
    let sel = check(&env, r, &[]);
    assert_eq!(names(&sel), ["keep", "typechange/inner", "uncached"]);
    assert!(sel.entries[2].index.is_none());
}

#[test]
fn unmerged_paths_listed_once() {
    let env = Env::new(true, true);
    let r = &env.repo;
    write(&r.join("f"), "base\n");
    env.git(r, &["add", "f"]);
    env.git(r, &["commit", "-q", "-m", "base"]);
    env.git(r, &["checkout", "-q", "-b", "other"]);
    write(&r.join("f"), "other\n");
    env.git(r, &["commit", "-q", "-am", "other"]);
    env.git(r, &["checkout", "-q", "main"]);
    write(&r.join("f"), "main\n");
    env.git(r, &["commit", "-q", "-am", "main"]);
    let st = env.cmd(r, &["merge", "-q", "other"]).output().unwrap();
    assert!(!st.status.success(), "expected a conflict");
    let stages = String::from_utf8(env.git(r, &["ls-files", "-s"])).unwrap();
    assert_eq!(stages.lines().count(), 3, "{stages}");
    let sel = check(&env, r, &[]);
    assert_eq!(names(&sel), ["f"]);
    assert_eq!(sel.entries[0].index.as_ref().map(|e| e.stage()), Some(2));
}

/// Parses `git ls-files -s --debug` into (mode, oid, stage, path, ctime, mtime, dev, ino,
/// uid, gid, size).
type Debug = (
    u32,
    String,
    u8,
    Vec<u8>,
    (u32, u32),
    (u32, u32),
    u32,
    u32,
    u32,
    u32,
    u32,
);

fn git_index_debug(env: &Env, dir: &Path) -> Vec<Debug> {
    let out = env.git(dir, &["ls-files", "-s", "--debug"]);
    let text = String::from_utf8_lossy(&out).into_owned();
    let mut res = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(head) = lines.next() {
        let (meta, path) = head.split_once('\t').unwrap();
        let mut m = meta.split(' ');
        let mode = u32::from_str_radix(m.next().unwrap(), 8).unwrap();
        let oid = m.next().unwrap().to_string();
        let stage: u8 = m.next().unwrap().parse().unwrap();
        let mut nums = Vec::new();
        for _ in 0..5 {
            let l = lines.next().unwrap();
            for part in l.split('\t') {
                let (_, v) = part.trim().split_once(": ").unwrap();
                for x in v.split(':') {
                    nums.push(x.parse::<u32>().unwrap());
                }
            }
        }
        // ctime s:ns, mtime s:ns, dev, ino, uid, gid, size, flags
        res.push((
            mode,
            oid,
            stage,
            path.as_bytes().to_vec(),
            (nums[0], nums[1]),
            (nums[2], nums[3]),
            nums[4],
            nums[5],
            nums[6],
            nums[7],
            nums[8],
        ));
    }
    res
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn assert_index_matches_git(env: &Env, dir: &Path, index: &Path) {
    let ours = read_index(index).unwrap();
    let theirs = git_index_debug(env, dir);
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        let o2: Debug = (
            o.mode,
            hex(o.oid.as_bytes()),
            o.stage(),
            o.path.clone(),
            o.ctime,
            o.mtime,
            o.dev,
            o.ino,
            o.uid,
            o.gid,
            o.size,
        );
        assert_eq!(&o2, t);
    }
}

#[test]
fn index_versions_2_3_4() {
    let env = Env::new(true, true);
    let r = &env.repo;
    let mut paths: Vec<String> = (0..40)
        .map(|i| format!("dir{}/sub{}/file-{i}.txt", i % 3, i % 5))
        .collect();
    paths.push("long-name-".repeat(20) + "/" + &"x".repeat(200)); // names of 300+ bytes
    for p in &paths {
        write(&r.join(p), p);
    }
    env.git(r, &["add", "-A"]);
    env.git(r, &["commit", "-q", "-m", "x"]);
    let index = r.join(".git/index");
    let version = || u32::from_be_bytes(fs::read(&index).unwrap()[4..8].try_into().unwrap());
    assert_eq!(version(), 2);
    assert_index_matches_git(&env, r, &index);
    check(&env, r, &[]);

    // Version 3: extended flags (intent-to-add, skip-worktree).
    files(r, &["ita.txt"]);
    env.git(r, &["add", "-N", "ita.txt"]);
    env.git(
        r,
        &["update-index", "--skip-worktree", "dir0/sub0/file-0.txt"],
    );
    assert_eq!(version(), 3);
    assert_index_matches_git(&env, r, &index);
    let ours = read_index(&index).unwrap();
    assert!(ours
        .iter()
        .any(|e| e.path == b"ita.txt" && e.intent_to_add()));
    assert!(ours
        .iter()
        .any(|e| e.path == b"dir0/sub0/file-0.txt" && e.skip_worktree()));
    check(&env, r, &[]);

    // Version 4: prefix-compressed paths.
    env.git(r, &["update-index", "--index-version", "4"]);
    assert_eq!(version(), 4);
    assert_index_matches_git(&env, r, &index);
    let sel = check(&env, r, &[]);
    assert_eq!(sel.entries.len(), paths.len() + 1);
}

#[test]
fn corrupt_split_and_sparse_index_are_errors() {
    let env = Env::new(true, true);
    let r = &env.repo;
    files(r, &["a/x", "b/y", "c"]);
    env.git(r, &["add", "-A"]);
    env.git(r, &["commit", "-q", "-m", "x"]);
    let index = r.join(".git/index");
    let good = fs::read(&index).unwrap();

    // Flipped byte: checksum mismatch. Truncations: errors, no panics.
    let mut bad = good.clone();
    bad[20] ^= 1;
    fs::write(&index, &bad).unwrap();
    assert!(matches!(read_index(&index), Err(Error::Git { .. })));
    assert!(matches!(
        select_project_with(r, &[], &env.opts()),
        Err(Error::Git { .. })
    ));
    for n in [0, 5, 12, 40, good.len() - 21, good.len() - 1] {
        fs::write(&index, &good[..n]).unwrap();
        assert!(read_index(&index).is_err(), "truncated to {n}");
    }
    fs::write(&index, &good).unwrap();
    assert_eq!(read_index(&index).unwrap().len(), 3);

    // Split index.
    env.git(r, &["update-index", "--split-index"]);
    let e = read_index(&index).unwrap_err();
    assert!(e.to_string().contains("split index"), "{e}");
    env.git(r, &["update-index", "--no-split-index"]);
    assert_eq!(read_index(&index).unwrap().len(), 3);

    // Sparse index.
    env.git(
        r,
        &["sparse-checkout", "set", "--cone", "--sparse-index", "a"],
    );
    let e = read_index(&index).unwrap_err();
    assert!(e.to_string().contains("sparse index"), "{e}");
    assert!(matches!(
        select_project_with(r, &[], &env.opts()),
        Err(Error::Git { .. })
    ));
}

#[test]
fn info_exclude_and_repo_excludes_file() {
    let env = Env::new(true, true);
    let r = &env.repo;
    write(&r.join(".git/info/exclude"), "*.secret\nlocal-only/\n");
    let cfg_ignore = env.root.join("my-excludes");
    write(&cfg_ignore, "*.cfgign\n!keep.secret\n");
    env.git(
        r,
        &["config", "core.excludesFile", cfg_ignore.to_str().unwrap()],
    );
    // The default global file must not be used when core.excludesFile is set.
    write(&env.xdg.as_ref().unwrap().join("git/ignore"), "*.txt\n");
    write(&r.join(".gitignore"), "!re.cfgign\n");
    files(
        r,
        &[
            "a.secret",
            "keep.secret",
            "b.cfgign",
            "re.cfgign",
            "c.txt",
            "local-only/f",
        ],
    );
    let sel = check(&env, r, &[]);
    assert_eq!(names(&sel), [".gitignore", "c.txt", "re.cfgign"]);
}

#[test]
fn global_ignore_from_home_config_dir() {
    // No XDG_CONFIG_HOME: ~/.config/git/ignore is the default excludes file.
    let env = Env::new(false, true);
    write(&env.home.join(".config/git/ignore"), "*.glob\n");
    files(&env.repo, &["a.glob", "b.txt"]);
    let sel = check(&env, &env.repo, &[]);
    assert_eq!(names(&sel), ["b.txt"]);
}

#[test]
fn global_ignore_from_xdg_and_gitconfig() {
    let env = Env::new(true, true);
    let xdg = env.xdg.clone().unwrap();
    // With XDG_CONFIG_HOME set, ~/.config/git/ignore is not read.
    write(&env.home.join(".config/git/ignore"), "*.home\n");
    write(&xdg.join("git/ignore"), "*.xdg\n");
    files(&env.repo, &["a.home", "a.xdg", "a.gc"]);
    let sel = check(&env, &env.repo, &[]);
    assert_eq!(names(&sel), ["a.gc", "a.home"]);

    // core.excludesFile in ~/.gitconfig ("~/" expanded) replaces the default file.
    write(
        &env.home.join(".gitconfig"),
        "[core]\n\texcludesfile = ~/gc-ignore\n",
    );
    write(&env.home.join("gc-ignore"), "*.gc\n");
    let sel = check(&env, &env.repo, &[]);
    assert_eq!(names(&sel), ["a.home", "a.xdg"]);

    // ... and the XDG config file is read too (and ~/.gitconfig overrides it).
    fs::remove_file(env.home.join(".gitconfig")).unwrap();
    write(
        &xdg.join("git/config"),
        "[core]\n\texcludesfile = ~/gc-ignore2\n",
    );
    write(&env.home.join("gc-ignore2"), "*.home\n");
    let sel = check(&env, &env.repo, &[]);
    assert_eq!(names(&sel), ["a.gc", "a.xdg"]);
}

#[test]
fn project_is_a_subdirectory() {
    let env = Env::new(true, true);
    tricky_repo(&env);
    for sub in ["sub", "sub/inner", "dir", "ign", "build", "a/b"] {
        let p = env.repo.join(sub);
        let sel = check(&env, &p, &[]);
        let git = sel.git.as_ref().unwrap();
        assert_eq!(git.work_tree, env.repo);
        assert_eq!(git.prefix.as_ref().unwrap().to_string(), sub);
    }
    // An ignored subdirectory with a tracked file: only the tracked file.
    let sel = check(&env, &env.repo.join("build"), &[]);
    assert_eq!(names(&sel), ["tracked.txt"]);
}

#[test]
fn linked_worktree_gitdir_file() {
    let env = Env::new(true, true);
    tricky_repo(&env);
    let wt = env.root.join("wt");
    env.git(&env.repo, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    assert!(fs::metadata(wt.join(".git")).unwrap().is_file());
    files(&wt, &["wt-new.txt", "wt.log", "build/x"]);
    write(&env.repo.join(".git/info/exclude"), "wt-new.txt\n");
    let sel = check(&env, &wt, &[]);
    let git = sel.git.as_ref().unwrap();
    assert_eq!(git.work_tree, wt);
    assert!(git.git_dir.ends_with("worktrees/wt"), "{:?}", git.git_dir);
    assert_eq!(git.common_dir, env.repo.join(".git"));
    check(&env, &wt.join("sub"), &[]);
}

#[test]
fn nested_repositories_and_submodules() {
    let env = Env::new(true, true);
    let r = &env.repo;
    files(
        r,
        &[
            "top.txt",
            "emb/f",
            "inner/g",
            "ignored-repo/h",
            "plain/.git/junk",
        ],
    );
    write(&r.join(".gitignore"), "ignored-repo/\n");
    env.git(&r.join("emb"), &["init", "-q"]);
    env.git(&r.join("emb"), &["add", "f"]);
    env.git(&r.join("emb"), &["commit", "-q", "-m", "e"]);
    env.git(&r.join("inner"), &["init", "-q"]);
    env.git(&r.join("ignored-repo"), &["init", "-q"]);
    // `emb` becomes a gitlink (submodule without .gitmodules).
    env.git(r, &["add", "top.txt", ".gitignore", "emb"]);
    // A directory with tracked files that later gets its own repository: git still lists it.
    files(r, &["mixed/t"]);
    env.git(r, &["add", "mixed/t"]);
    env.git(r, &["commit", "-q", "-m", "x"]);
    env.git(&r.join("mixed"), &["init", "-q"]);
    files(r, &["mixed/u"]);
    let sel = check(&env, r, &[]);
    // `plain/.git` is not a repository: plain/ is descended, its `.git` skipped.
    assert_eq!(names(&sel), [".gitignore", "mixed/t", "mixed/u", "top.txt"]);
    assert_eq!(
        skipped(&sel),
        [
            ("emb".to_string(), "submodule"),
            ("inner".to_string(), "nested repository")
        ]
    );
}

#[test]
fn not_a_repository_takes_everything() {
    let env = Env::new(true, false);
    let r = &env.repo;
    write(&r.join(".gitignore"), "*.log\n");
    files(r, &["a.log", "b/c.txt", "d/.git/config", "d/e", "f/.git"]);
    fs::create_dir_all(r.join("empty")).unwrap();
    symlink("b", r.join("l")).unwrap();
    let sel = env.select(r, &[]);
    assert!(sel.git.is_none());
    assert_eq!(names(&sel), [".gitignore", "a.log", "b/c.txt", "d/e", "l"]);
    assert_eq!(sel.entries[4].kind, Kind::Symlink);
    // A `.git` file that points nowhere is an error, as it is for git.
    write(&r.join(".git"), "gitdir: /nonexistent\n");
    assert!(matches!(
        select_project_with(r, &[], &env.opts()),
        Err(Error::Git { .. })
    ));
    assert!(!env.cmd(r, &["ls-files"]).output().unwrap().status.success());
}

#[test]
fn exclude_parameter_skips_a_directory() {
    let env = Env::new(true, true);
    tricky_repo(&env);
    let sandbox = env.repo.join(".sandboxes");
    files(&sandbox, &["s1/base/file", "s1/x"]);
    let sel = env.select(&env.repo, std::slice::from_ref(&sandbox));
    assert!(sel
        .entries
        .iter()
        .all(|e| !e.rel.as_bytes().starts_with(b".sandboxes")));
    // Everything else is exactly git's set minus the sandbox files.
    let want = oracle(&env, &env.repo);
    let want: Vec<String> = show(&want.files)
        .into_iter()
        .filter(|p| !p.starts_with(".sandboxes/"))
        .collect();
    assert_eq!(names(&sel), want);
    // Non-git project too.
    let env = Env::new(true, false);
    files(&env.repo, &["a", "out/b"]);
    let sel = env.select(&env.repo, &[env.repo.join("out")]);
    assert_eq!(names(&sel), ["a"]);
}

#[test]
fn unreadable_directory_is_reported() {
    // Permissions do not stop root: re-run this test as `nobody` when we are root.
    if unsafe { libc::geteuid() } == 0 {
        let exe = std::env::current_exe().unwrap();
        let run = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe)
            .args([
                "--exact",
                "unreadable_directory_is_reported",
                "--test-threads=1",
            ])
            .env("TMPDIR", "/tmp")
            .output();
        match run {
            // 126/127: setpriv missing or the test binary not reachable by nobody: skip.
            Ok(o) if matches!(o.status.code(), Some(126) | Some(127)) => {}
            Ok(o) => assert!(
                o.status.success(),
                "as nobody: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(_) => {}
        }
        return;
    }
    let env = Env::new(true, false);
    files(&env.repo, &["a", "locked/b", "ok/c"]);
    fs::set_permissions(env.repo.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
    let sel = env.select(&env.repo, &[]);
    fs::set_permissions(env.repo.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(names(&sel), ["a", "ok/c"]);
    assert_eq!(skipped(&sel), [("locked".to_string(), "unreadable")]);
}

#[test]
fn symlinked_gitignore_is_not_read() {
    let env = Env::new(true, true);
    let r = &env.repo;
    write(&r.join("rules"), "*.x\n");
    fs::create_dir(r.join("d")).unwrap();
    symlink("../rules", r.join("d/.gitignore")).unwrap();
    files(r, &["d/a.x", "a.x"]);
    let out = env
        .cmd(r, &["ls-files", "-o", "--exclude-standard"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let sel = check(&env, r, &[]);
    assert!(names(&sel).contains(&"d/a.x".to_string()));
}

#[test]
fn ignore_rules_match_check_ignore() {
    let env = Env::new(true, true);
    tricky_repo(&env);
    write(&env.repo.join(".git/info/exclude"), "*.info\n");
    write(&env.xdg.as_ref().unwrap().join("git/ignore"), "*.glob\n");
    let candidates = [
        "n.log",
        "sub/keep.log",
        "sub/deeper/keep.log",
        "sub/nope.log",
        "anchored",
        "sub/anchored",
        "q/tmp/f",
        "tmpx",
        "dir/new",
        "dir/keep.txt",
        "dir/deep/keep.txt",
        "build/new",
        "sub/build/new",
        "ign/reinclude.txt",
        "n.o",
        "important.o",
        "sub/inner/n.o",
        "sub/inner/n.txt",
        "deep/q/x",
        "deep/q/r/x",
        "a/q/r/z",
        "z.{a,b}",
        "b.cls",
        "e.cls",
        "#hash",
        "!bang",
        "trail",
        "only-dir/new",
        "sub/local",
        "sub/q/local",
        "sub/sub-anchored",
        "sub/q/sub-anchored",
        "fresh.txt",
        "x.info",
        "sub/y.glob",
        "ünïcødé/new file",
    ];
    // A copy of the project (a sandbox), with an extra .gitignore only the copy has.
    let copy = env.root.join("copy");
    let status = Command::new("cp")
        .args(["-a"])
        .arg(&env.repo)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    fs::remove_dir_all(copy.join(".git")).unwrap();
    write(&copy.join("fresh/.gitignore"), "*.fresh\n");
    write(&env.repo.join("fresh/.gitignore"), "*.fresh\n");
    let mut all: Vec<&str> = candidates.to_vec();
    all.push("fresh/a.fresh");
    all.push("fresh/b.txt");

    let sel = env.select(&env.repo, &[]);
    let repo = sel.git.unwrap();
    let rules = IgnoreRules::load(&copy, Some(&repo)).unwrap();
    let ignored_by_git = check_ignore(&env, &env.repo, &all);
    for p in &all {
        let ours = rules.is_ignored(&RelPath::new(p).unwrap(), false);
        assert_eq!(
            ours,
            ignored_by_git.contains(*p),
            "is_ignored({p:?}) disagrees with git check-ignore"
        );
    }
    assert!(rules.is_ignored(&RelPath::new("build").unwrap(), true));
    assert!(!rules.is_ignored(&RelPath::new("sub").unwrap(), true));

    // From a subdirectory project: prefix-relative paths, rules above the project apply.
    let sub_sel = env.select(&env.repo.join("sub"), &[]);
    let sub_repo = sub_sel.git.unwrap();
    let rules = IgnoreRules::load(&copy.join("sub"), Some(&sub_repo)).unwrap();
    let sub_paths = [
        "keep.log", "nope.log", "anchored", "build/x", "local", "q/tmp/f", "n.o",
    ];
    let ignored_by_git = check_ignore(&env, &env.repo.join("sub"), &sub_paths);
    for p in sub_paths {
        assert_eq!(
            rules.is_ignored(&RelPath::new(p).unwrap(), false),
            ignored_by_git.contains(p),
            "sub: is_ignored({p:?})"
        );
    }
}

/// The subset of `paths` that `git check-ignore --no-index` reports as ignored.
fn check_ignore<'a>(env: &Env, dir: &Path, paths: &[&'a str]) -> BTreeSet<&'a str> {
    let mut c = env.cmd(dir, &["check-ignore", "--no-index", "--stdin", "-z"]);
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for p in paths {
            stdin.write_all(p.as_bytes()).unwrap();
            stdin.write_all(b"\0").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    let listed: BTreeSet<Vec<u8>> = split_z(&out.stdout).into_iter().collect();
    paths
        .iter()
        .copied()
        .filter(|p| listed.contains(p.as_bytes()))
        .collect()
}

/// Small deterministic PRNG (xorshift64*), so failures reproduce.
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
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

fn random_pattern(rng: &mut Rng) -> String {
    const PARTS: &[&str] = &[
        "a",
        "b",
        "ab",
        "*.o",
        "*",
        "?",
        "[ab]",
        "**",
        "a*",
        "*b",
        "x.o",
        "[!a]*",
        "\\*",
        "a?",
        "[a-c]*",
        "[[:alpha:]]",
        "A",
        "ab*",
    ];
    let n = 1 + rng.below(3);
    let mut p: Vec<&str> = (0..n).map(|_| rng.pick(PARTS)).collect();
    if rng.below(6) == 0 {
        p.push("**");
    }
    let mut s = p.join("/");
    if rng.below(4) == 0 {
        s.insert(0, '/');
    }
    if rng.below(4) == 0 {
        s.push('/');
    }
    if rng.below(4) == 0 {
        s.insert(0, '!');
    }
    s
}

/// Random trees and random .gitignore files, compared with git: this is where the `ignore`
/// crate's glob translation and this module's precedence and pruning get exercised together.
#[test]
fn random_patterns_match_git() {
    const NAMES: &[&str] = &["a", "b", "ab", "x.o", "a.o", "ba", "*", "c", "A"];
    let iterations = std::env::var("SELECT_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let seed0 = std::env::var("SELECT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_u64);
    for it in 0..iterations {
        let seed = seed0.wrapping_add(it).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rng = Rng(seed);
        let env = Env::new(true, true);
        let r = &env.repo;
        let mut paths = Vec::new();
        for _ in 0..40 {
            let depth = 1 + rng.below(4);
            let comps: Vec<&str> = (0..depth).map(|_| rng.pick(NAMES)).collect();
            paths.push(comps.join("/"));
        }
        for p in &paths {
            // A name may already exist as a file where a directory is wanted: skip those.
            let full = r.join(p);
            if full.parent().is_some_and(|d| fs::create_dir_all(d).is_ok()) && !full.is_dir() {
                let _ = fs::write(&full, "x");
            }
        }
        let mut dirs: Vec<PathBuf> = vec![r.clone()];
        for p in &paths {
            let mut d = r.join(p);
            while d.pop() && d != *r {
                if d.is_dir() {
                    dirs.push(d.clone());
                }
            }
        }
        let mut rules_text = String::new();
        for _ in 0..1 + rng.below(4) {
            let d = dirs[rng.below(dirs.len())].clone();
            let pats: Vec<String> = (0..1 + rng.below(5))
                .map(|_| random_pattern(&mut rng))
                .collect();
            let text = pats.join("\n") + "\n";
            rules_text.push_str(&format!("{}:\n{text}", d.display()));
            fs::write(d.join(".gitignore"), text).unwrap();
        }
        if rng.below(2) == 0 {
            let pats: Vec<String> = (0..2).map(|_| random_pattern(&mut rng)).collect();
            write(&r.join(".git/info/exclude"), &(pats.join("\n") + "\n"));
        }
        // Track a few files regardless of the rules.
        for _ in 0..3 {
            let p = &paths[rng.below(paths.len())];
            if r.join(p).is_file() {
                env.git(r, &["add", "-f", "--", &format!(":(literal){p}")]);
            }
        }
        let result = std::panic::catch_unwind(|| {
            check(&env, r, &[]);
            for d in &dirs[1..] {
                check(&env, d, &[]);
            }
        });
        if let Err(e) = result {
            eprintln!("seed {seed:#x} (iteration {it}); rules:\n{rules_text}");
            std::panic::resume_unwind(e);
        }
    }
}

/// `git check-attr` for the conversion attributes of `paths` (relative to `dir`): per path,
/// attribute name → `set` / `unset` / `unspecified` / value.
fn check_attr(
    env: &Env,
    dir: &Path,
    paths: &[Vec<u8>],
) -> std::collections::BTreeMap<Vec<u8>, std::collections::BTreeMap<String, String>> {
    let mut c = env.cmd(
        dir,
        &[
            "check-attr",
            "-z",
            "--stdin",
            "text",
            "crlf",
            "eol",
            "filter",
            "ident",
            "working-tree-encoding",
        ],
    );
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for p in paths {
            stdin.write_all(p).unwrap();
            stdin.write_all(b"\0").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let fields = out.stdout.split(|&b| b == 0).collect::<Vec<_>>();
    let mut map: std::collections::BTreeMap<_, std::collections::BTreeMap<_, _>> =
        Default::default();
    for f in fields.chunks_exact(3) {
        map.entry(f[0].to_vec()).or_default().insert(
            String::from_utf8_lossy(f[1]).into_owned(),
            String::from_utf8_lossy(f[2]).into_owned(),
        );
    }
    map
}

/// git's `convert_attrs`, restated over `check-attr` output (see `git/attributes.rs`).
fn git_converts(a: &std::collections::BTreeMap<String, String>, autocrlf: bool) -> bool {
    let get = |k: &str| a.get(k).map_or("unspecified", String::as_str);
    let special = |v: &str| matches!(v, "set" | "unset" | "unspecified");
    if !special(get("filter")) || get("ident") == "set" {
        return true;
    }
    let wte = get("working-tree-encoding");
    if !special(wte) && !wte.is_empty() {
        return true;
    }
    let action = |v: &str| match v {
        "set" | "input" | "auto" => Some(true),
        "unset" => Some(false),
        _ => None,
    };
    match action(get("text")).or(action(get("crlf"))) {
        Some(c) => c,
        None => matches!(get("eol"), "lf" | "crlf") || autocrlf,
    }
}

/// A repository exercising the attribute stack: nested files with overrides, macros (honoured
/// at the top, ignored below), `!attr`, `info/attributes`, `core.attributesFile` from
/// `~/.gitconfig`, the XDG file, an ignored directory with tracked files, a symlinked
/// `.gitattributes` (not followed) and a tracked one deleted from the work tree (read from the
/// index).
fn attr_repo(env: &Env) {
    let r = &env.repo;
    let exts = ["a", "b", "c", "d", "e", "f", "g", "h", "k", "m", "n", "z"];
    let dirs = ["", "sub/", "sub/deep/", "build/", "lnk/", "gone/", "other/"];
    for d in dirs {
        for x in exts {
            write(&r.join(format!("{d}x.{x}")), "x\n");
        }
        for x in ["top.x", "g.glob", "g.gm", "g.info", "g.xdg", "CASE.A"] {
            write(&r.join(format!("{d}{x}")), "y\n");
        }
    }
    write(
        &r.join(".gitattributes"),
        "[attr]conv text\n*.a text\n*.b binary\n*.c conv\n*.d ident\n*.e eol=crlf\n\
         *.f filter=lfs diff=lfs merge=lfs -text\n*.g working-tree-encoding=ISO-8859-1\n\
         *.h -text eol=crlf\n*.k crlf\n/top.x text\n*.n crlf=input\nother/** text\n",
    );
    write(
        &r.join("sub/.gitattributes"),
        "*.a -text\n[attr]subm text\n*.m subm\n*.x text\n*.c !text\n",
    );
    write(
        &r.join("sub/deep/.gitattributes"),
        "*.a text\n*.b !text\n*.e -text\ndeep text\n",
    );
    write(&r.join("build/.gitattributes"), "*.a -text\n*.z ident\n");
    write(&r.join("gone/.gitattributes"), "*.a -text\n*.z text\n");
    write(&r.join("attrsrc"), "*.a -text\n*.z text\n");
    symlink("../attrsrc", r.join("lnk/.gitattributes")).unwrap();
    write(&r.join(".gitignore"), "build/\n");
    write(
        &r.join(".git/info/attributes"),
        "*.info text\nsub/*.h text\n",
    );
    write(
        &env.home.join("attrs"),
        "*.glob text\n[attr]gm filter=x\n*.gm gm\n",
    );
    write(
        &env.home.join(".gitconfig"),
        "[core]\n\tattributesFile = ~/attrs\n",
    );
    env.git(r, &["add", "-A"]);
    env.git(r, &["add", "-f", "build"]);
    env.git(r, &["commit", "-q", "-m", "attrs"]);
    fs::remove_file(r.join("gone/.gitattributes")).unwrap();
}

/// `Selected::converted` of every tracked file against `git check-attr` run in `dir`.
fn assert_conversions_match_git(env: &Env, project: &Path, autocrlf: bool) {
    let sel = env.select(project, &[]);
    let tracked: Vec<&patchbox::tree::select::Selected> = sel
        .entries
        .iter()
        .filter(|e| e.index.is_some() && matches!(e.kind, Kind::File { .. }))
        .collect();
    assert!(tracked.len() > 10, "{}", tracked.len());
    let paths: Vec<Vec<u8>> = tracked.iter().map(|e| e.rel.as_bytes().to_vec()).collect();
    let attrs = check_attr(env, project, &paths);
    let mut wrong = Vec::new();
    for e in &tracked {
        let want = git_converts(&attrs[e.rel.as_bytes()], autocrlf);
        if e.converted != want {
            wrong.push(format!("{}: ours {} git {want}", e.rel, e.converted));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Untracked files and symlinks are never marked.
    assert!(sel
        .entries
        .iter()
        .filter(|e| e.index.is_none() || e.kind == Kind::Symlink)
        .all(|e| !e.converted));
}

#[test]
fn conversions_match_check_attr() {
    let env = Env::new(true, true);
    attr_repo(&env);
    write(
        &env.xdg.as_ref().unwrap().join("git/attributes"),
        "*.xdg text\n",
    );
    // core.attributesFile (from ~/.gitconfig) replaces the XDG file.
    let sel = env.select(&env.repo, &[]);
    let xdg = sel
        .entries
        .iter()
        .find(|e| e.rel.as_bytes() == b"g.xdg")
        .unwrap();
    assert!(!xdg.converted);
    let conv = |p: &str| {
        let e = sel
            .entries
            .iter()
            .find(|e| e.rel.as_bytes() == p.as_bytes());
        e.unwrap_or_else(|| panic!("{p} selected")).converted
    };
    for (p, want) in [
        ("x.a", true),
        ("sub/x.a", false),
        ("sub/deep/x.a", true),
        ("gone/x.a", false), // the deleted file, read from the index
        ("gone/x.z", true),
        ("lnk/x.a", true), // the symlinked file is not followed
        ("lnk/x.z", false),
        ("build/x.a", false), // ignored directory, tracked files
        ("build/x.z", true),
        ("x.b", false),
        ("x.c", true),
        ("sub/x.c", false),
        ("sub/x.m", false), // macro defined below the top
        ("x.f", true),
        ("x.h", false),
        ("g.info", true),
        ("g.glob", true),
        ("g.gm", true),
        ("other/x.z", true),
        ("x.z", false),
    ] {
        assert_eq!(conv(p), want, "{p}");
    }
    assert_conversions_match_git(&env, &env.repo, false);
    // From a subdirectory: the files above it still apply.
    assert_conversions_match_git(&env, &env.repo.join("sub/deep"), false);
    assert_conversions_match_git(&env, &env.repo.join("gone"), false);

    // Without core.attributesFile, the XDG file.
    fs::remove_file(env.home.join(".gitconfig")).unwrap();
    assert_conversions_match_git(&env, &env.repo, false);
    let sel = env.select(&env.repo, &[]);
    assert!(sel
        .entries
        .iter()
        .any(|e| e.rel.as_bytes() == b"g.xdg" && e.converted));

    // core.autocrlf: everything git takes for text, `-text` files excepted.
    env.git(&env.repo, &["config", "core.autocrlf", "input"]);
    assert_conversions_match_git(&env, &env.repo, true);
    assert_conversions_match_git(&env, &env.repo.join("sub"), true);
}

#[test]
fn no_attributes_no_conversions() {
    let env = Env::new(false, true);
    files(&env.repo, &["a.txt", "d/b.txt"]);
    env.git(&env.repo, &["add", "-A"]);
    let sel = env.select(&env.repo, &[]);
    assert_eq!(sel.entries.len(), 2);
    assert!(sel.entries.iter().all(|e| !e.converted));
    env.git(&env.repo, &["config", "core.autocrlf", "true"]);
    let sel = env.select(&env.repo, &[]);
    assert!(sel.entries.iter().all(|e| e.converted));
}

/// A tree whose ignore rules exclude every top-level directory (`/*`, as packaging trees
/// have), its files tracked with `add -f`: the selection lists the excluded directories from
/// the index. Whatever the work tree did to the tracked paths since, the result is git's.
#[test]
fn excluded_directories_listed_from_the_index() {
    let env = Env::new(true, true);
    let r = &env.repo;
    write(&r.join(".gitignore"), "/*\n!/.gitignore\n");
    files(
        r,
        &[
            "a/one",
            "a/two",
            "a/b/three",
            "a/b/c/four",
            "a/b/c/.gitattributes",
            "d/five",
            "d/e/six",
            "d/e/seven",
            "f/eight",
            "g/nine",
            "h/ten",
            "h/i/eleven",
            "top.txt",
        ],
    );
    symlink("one", r.join("a/link")).unwrap();
    // A submodule (gitlink) inside an excluded directory.
    files(r, &["s/emb/f"]);
    env.git(&r.join("s/emb"), &["init", "-q"]);
    env.git(&r.join("s/emb"), &["add", "f"]);
    env.git(&r.join("s/emb"), &["commit", "-q", "-m", "e"]);
    env.git(r, &["add", "-f", "."]);
    env.git(r, &["commit", "-q", "-m", "init"]);
    // Untracked files inside excluded directories stay out.
    files(r, &["a/new", "a/b/new", "zz/new", "a/b/c/new"]);
    // A tracked file deleted, one replaced by a directory, one by a symlink.
    fs::remove_file(r.join("a/two")).unwrap();
    fs::remove_file(r.join("d/five")).unwrap();
    files(r, &["d/five/inner"]);
    fs::remove_file(r.join("f/eight")).unwrap();
    symlink("../g/nine", r.join("f/eight")).unwrap();
    // A tracked directory replaced by a symlink to another one (never followed) and one
    // replaced by a file.
    fs::remove_dir_all(r.join("d/e")).unwrap();
    symlink("../h/i", r.join("d/e")).unwrap();
    fs::remove_dir_all(r.join("h/i")).unwrap();
    write(&r.join("h/i"), "a file now");
    // An executable bit changed.
    fs::set_permissions(r.join("a/one"), fs::Permissions::from_mode(0o755)).unwrap();
    let sel = check(&env, r, &[]);
    assert_eq!(
        names(&sel),
        [
            ".gitignore",
            "a/b/c/.gitattributes",
            "a/b/c/four",
            "a/b/three",
            "a/link",
            "a/one",
            "f/eight",
            "g/nine",
            "h/ten",
            "top.txt"
        ]
    );
    assert_eq!(sel.entries[4].kind, Kind::Symlink);
    assert_eq!(sel.entries[5].kind, Kind::File { executable: true });
    assert_eq!(sel.entries[6].kind, Kind::Symlink);
    assert_eq!(skipped(&sel), [("s/emb".to_string(), "submodule")]);
    // A directory excluded by the caller (a sandbox root inside the project) is not entered.
    let sel = check_without(&env, r, &r.join("a/b"));
    assert!(!names(&sel).iter().any(|p| p.starts_with("a/b/")));
    // A subdirectory as the project, inside an excluded directory.
    let sel = check(&env, &r.join("a/b"), &[]);
    assert_eq!(names(&sel), ["c/.gitattributes", "c/four", "three"]);
}

/// Selects `project` with `dir` excluded: git's set without the files below `dir`.
fn check_without(env: &Env, project: &Path, dir: &Path) -> Selection {
    let sel = env.select(project, &[dir.to_path_buf()]);
    let prefix = dir
        .strip_prefix(project)
        .unwrap()
        .to_string_lossy()
        .into_owned()
        + "/";
    let want: Vec<String> = show(&oracle(env, project).files)
        .into_iter()
        .filter(|p| !p.starts_with(&prefix))
        .collect();
    assert_eq!(names(&sel), want);
    sel
}

/// An untracked `.gitattributes` inside an excluded directory applies to the tracked files
/// below it, as it does for git, although the directory is listed from the index.
#[test]
fn attributes_in_an_excluded_directory_apply() {
    let env = Env::new(true, true);
    let r = &env.repo;
    write(&r.join(".gitignore"), "/*\n!/.gitignore\n");
    let mut paths = Vec::new();
    for d in ["x", "x/y", "x/y/z", "w"] {
        for f in [
            "a.txt", "b.bin", "c.md", "d.txt", "e.c", "f.h", "g.txt", "h.sh",
        ] {
            paths.push(format!("{d}/{f}"));
        }
    }
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    files(r, &refs);
    env.git(r, &["add", "-f", "."]);
    env.git(r, &["commit", "-q", "-m", "init"]);
    write(&r.join("x/.gitattributes"), "*.txt text\n*.c filter=lfs\n");
    write(&r.join("x/y/z/.gitattributes"), "*.txt -text\n*.md ident\n");
    assert_conversions_match_git(&env, r, false);
    let sel = env.select(r, &[]);
    let converted: Vec<String> = sel
        .entries
        .iter()
        .filter(|e| e.converted)
        .map(|e| e.rel.to_string())
        .collect();
    assert!(converted.contains(&"x/a.txt".to_string()), "{converted:?}");
    assert!(converted.contains(&"x/y/e.c".to_string()), "{converted:?}");
    assert!(
        !converted.contains(&"x/y/z/a.txt".to_string()),
        "{converted:?}"
    );
    assert!(
        converted.contains(&"x/y/z/c.md".to_string()),
        "{converted:?}"
    );
    assert!(
        !converted.iter().any(|p| p.starts_with("w/")),
        "{converted:?}"
    );
}
