//! `patchbox::git::odb::ObjectStore` against git itself: every object that
//! `git cat-file --batch-all-objects --batch` prints must be read back byte for byte, from loose
//! objects, packs with deep `OFS_DELTA` and `REF_DELTA` chains, version 1 indexes, large-offset
//! tables, mixed stores, alternates (absolute, relative, chained) and linked worktrees. Corrupt
//! data must give errors (never panics, never wrong content), and the repository must be
//! byte-identical afterwards.
//!
//! git runs with `HOME`/`XDG_CONFIG_HOME` in the test's temp dir and `GIT_CONFIG_NOSYSTEM=1`
//! (set per command; the process environment is never changed).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use patchbox::git::odb::ObjectStore;
use patchbox::git::oid::{object_id, ObjectId, ObjectKind};
use patchbox::Error;

// ---------------------------------------------------------------------------------------------
// Environment and git helpers
// ---------------------------------------------------------------------------------------------

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        fs::create_dir(&home).unwrap();
        Env {
            _tmp: tmp,
            root,
            home,
        }
    }

    fn cmd(&self, dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(dir)
        .env("HOME", &self.home)
        .env("XDG_CONFIG_HOME", &self.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES");
        c
    }

    /// Runs git in `dir`, feeding `input`, and returns stdout; panics on failure.
    fn git_io(&self, dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
        let mut child = self
            .cmd(dir, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("git runs");
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    fn git(&self, dir: &Path, args: &[&str]) -> Vec<u8> {
        self.git_io(dir, args, b"")
    }
}

/// Deterministic pseudo-random bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn text_lines(rng: &mut Rng, n: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "alpha", "beta", "gamma", "delta", "fn", "let", "match", "return", "self", "{", "}",
        "0x7f", "patch", "sandbox", "object", "pack",
    ];
    (0..n)
        .map(|i| {
            let k = 3 + rng.below(8);
            let mut s = format!("{i:05}:");
            for _ in 0..k {
                s.push(' ');
                s.push_str(WORDS[rng.below(WORDS.len())]);
            }
            s
        })
        .collect()
}

/// A `git fast-import` stream builder.
struct FastImport {
    out: Vec<u8>,
    mark: usize,
    time: u64,
}

impl FastImport {
    fn new() -> Self {
        FastImport {
            out: Vec::new(),
            mark: 0,
            time: 1_700_000_000,
        }
    }

    fn blob(&mut self, data: &[u8]) -> usize {
        self.mark += 1;
        write!(self.out, "blob\nmark :{}\ndata {}\n", self.mark, data.len()).unwrap();
        self.out.extend_from_slice(data);
        self.out.push(b'\n');
        self.mark
    }

    /// A commit on refs/heads/main setting `files` (path, mode, blob mark).
    fn commit(&mut self, msg: &str, files: &[(String, &str, usize)]) {
        self.mark += 1;
        self.time += 60;
        write!(
            self.out,
            "commit refs/heads/main\nmark :{}\ncommitter t <t@t> {} +0000\ndata {}\n{}\n",
            self.mark,
            self.time,
            msg.len(),
            msg
        )
        .unwrap();
        for (path, mode, mark) in files {
            writeln!(self.out, "M {mode} :{mark} {path}").unwrap();
        }
        self.out.push(b'\n');
    }
}

/// A repository with varied blobs and 60 commits of slowly evolving files, built with
/// `git fast-import` (so its objects start in one pack). Returns the work tree.
fn make_repo(env: &Env, name: &str, seed: u64) -> PathBuf {
    let repo = env.root.join(name);
    fs::create_dir(&repo).unwrap();
    env.git(&repo, &["init", "-q"]);
    env.git(&repo, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    let mut rng = Rng(seed | 1);
    let mut fi = FastImport::new();

    let empty = fi.blob(b"");
    let small = fi.blob(b"hello\n");
    let mut bin = rng.bytes(4096);
    for i in (0..bin.len()).step_by(7) {
        bin[i] = 0;
    }
    let binm = fi.blob(&bin);
    let mut large: Vec<u8> = text_lines(&mut rng, 9000).join("\n").into_bytes();
    large.extend(rng.bytes((1 << 20) - large.len().min(1 << 19)));
    large.truncate(1 << 20);
    let largem = fi.blob(&large);
    let link = fi.blob(b"small.txt");
    let mut lines = text_lines(&mut rng, 400);
    let mut evbin = rng.bytes(20_000);
    let ev = fi.blob(lines.join("\n").as_bytes());
    let evb = fi.blob(&evbin);
    fi.commit(
        "initial",
        &[
            ("empty.txt".into(), "100644", empty),
            ("small.txt".into(), "100644", small),
            ("bin.dat".into(), "100644", binm),
            ("large.bin".into(), "100644", largem),
            ("link".into(), "120000", link),
            ("dir/evolving.txt".into(), "100644", ev),
            ("dir/evolving.bin".into(), "100755", evb),
        ],
    );
    for i in 0..60usize {
        let at = rng.below(lines.len());
        lines[at] = format!("changed in {i}: {}", rng.next());
        let at = rng.below(lines.len());
        lines.insert(at, format!("inserted in {i}"));
        if i % 5 == 0 {
            let at = rng.below(lines.len());
            lines.remove(at);
        }
        for _ in 0..3 {
            let at = rng.below(evbin.len());
            evbin[at] = rng.next() as u8;
        }
        let ev = fi.blob(lines.join("\n").as_bytes());
        let evb = fi.blob(&evbin);
        let mut files = vec![
            ("dir/evolving.txt".to_string(), "100644", ev),
            ("dir/evolving.bin".to_string(), "100755", evb),
            (
                format!("many/f{i}.txt"),
                "100644",
                fi.blob(format!("file {i}\n").as_bytes()),
            ),
        ];
        if i % 10 == 9 {
            large.extend_from_slice(format!("\nappended {i}").as_bytes());
            files.push(("large.bin".into(), "100644", fi.blob(&large)));
        }
        fi.commit(&format!("commit {i}"), &files);
    }
    env.git_io(&repo, &["fast-import", "--quiet"], &fi.out);
    env.git(&repo, &["tag", "-a", "v1", "-m", "annotated tag"]);
    env.git(&repo, &["reset", "-q", "--hard", "main"]);
    repo
}

/// Commits a few new files (loose objects) in `work`.
fn add_loose_commits(env: &Env, work: &Path, tag: &str, n: usize) {
    for i in 0..n {
        let p = work.join(format!("loose-{tag}-{i}.txt"));
        fs::write(&p, format!("{tag} {i}\n").repeat(i + 1)).unwrap();
        fs::write(work.join("small.txt"), format!("hello {tag} {i}\n")).unwrap();
        env.git(work, &["add", "-A"]);
        env.git(work, &["commit", "-q", "-m", &format!("{tag} {i}")]);
    }
}

/// Every object git can see from `work`: oid → (type, content).
fn git_objects(env: &Env, work: &Path) -> BTreeMap<ObjectId, (String, Vec<u8>)> {
    let out = env.git(work, &["cat-file", "--batch-all-objects", "--batch"]);
    let mut map = BTreeMap::new();
    let mut i = 0;
    while i < out.len() {
        let nl = i + out[i..].iter().position(|&b| b == b'\n').unwrap();
        let head = std::str::from_utf8(&out[i..nl]).unwrap();
        let mut parts = head.split(' ');
        let oid = ObjectId::from_hex(parts.next().unwrap()).unwrap();
        let kind = parts.next().unwrap().to_string();
        let size: usize = parts.next().unwrap().parse().unwrap();
        let data = out[nl + 1..nl + 1 + size].to_vec();
        assert_eq!(out[nl + 1 + size], b'\n');
        i = nl + 2 + size;
        map.insert(oid, (kind, data));
    }
    map
}

/// Reads every object git lists through a fresh store on `git_dir` and compares; returns the
/// number of blobs checked.
/// The whole temp dir (all repositories) must be byte-identical, mtimes included.
fn check_all(env: &Env, work: &Path, git_dir: &Path) -> usize {
    let objects = git_objects(env, work);
    let before = fingerprint(&env.root);
    let store = ObjectStore::open(git_dir).unwrap();
    let n = check_against(&store, &objects);
    assert_unchanged(&before, &fingerprint(&env.root));
    n
}

fn check_against(store: &ObjectStore, objects: &BTreeMap<ObjectId, (String, Vec<u8>)>) -> usize {
    let mut blobs = 0;
    for (oid, (kind, data)) in objects {
        assert!(store.contains(oid), "contains {oid}");
        if kind == "blob" {
            let got = store.read_blob(oid).unwrap();
            assert!(got.as_deref() == Some(&data[..]), "blob {}", oid.to_hex());
            blobs += 1;
        } else {
            let (k, d) = store.read_object(oid).unwrap().unwrap();
            assert_eq!(k.as_str(), kind, "{oid}");
            assert!(d == *data, "{kind} {oid}");
            assert!(matches!(store.read_blob(oid), Err(Error::Git { .. })));
        }
    }
    assert!(blobs > 0);
    blobs
}

fn pack_dir(git_dir: &Path) -> PathBuf {
    git_dir.join("objects").join("pack")
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn loose_count(git_dir: &Path) -> usize {
    let mut n = 0;
    for e in fs::read_dir(git_dir.join("objects")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().to_string();
        if name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit()) {
            n += fs::read_dir(e.path()).unwrap().count();
        }
    }
    n
}

/// Counts (OFS_DELTA, REF_DELTA, whole) entries of the version-2 packs in `git_dir`.
fn pack_entry_types(git_dir: &Path) -> (usize, usize, usize) {
    let (mut ofs, mut rf, mut whole) = (0, 0, 0);
    for idx in files_with_ext(&pack_dir(git_dir), "idx") {
        let d = fs::read(&idx).unwrap();
        assert_eq!(&d[..4], b"\xfftOc");
        let n = u32::from_be_bytes(d[8 + 255 * 4..8 + 256 * 4].try_into().unwrap()) as usize;
        let pack = fs::read(idx.with_extension("pack")).unwrap();
        for i in 0..n {
            let at = 8 + 1024 + n * 24 + i * 4;
            let off = u32::from_be_bytes(d[at..at + 4].try_into().unwrap());
            let off = if off & 0x8000_0000 != 0 {
                let k = (off & 0x7fff_ffff) as usize;
                let at = 8 + 1024 + n * 28 + k * 8;
                u64::from_be_bytes(d[at..at + 8].try_into().unwrap())
            } else {
                u64::from(off)
            };
            match (pack[off as usize] >> 4) & 7 {
                6 => ofs += 1,
                7 => rf += 1,
                _ => whole += 1,
            }
        }
    }
    (ofs, rf, whole)
}

/// The deepest delta chain `git verify-pack -v` reports.
fn max_chain(env: &Env, git_dir: &Path) -> usize {
    let mut max = 0;
    for idx in files_with_ext(&pack_dir(git_dir), "idx") {
        let out = env.git(git_dir, &["verify-pack", "-v", idx.to_str().unwrap()]);
        for line in String::from_utf8_lossy(&out).lines() {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() == 7 && cols[0].len() == 40 {
                max = max.max(cols[5].parse().unwrap_or(0));
            }
        }
    }
    max
}

/// Per path under `root`: (is_dir, mode, content, mtime s, mtime ns).
type Fingerprint = BTreeMap<PathBuf, (bool, u32, Vec<u8>, i64, i64)>;

fn fingerprint(root: &Path) -> Fingerprint {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root) {
        let e = e.unwrap();
        let m = fs::symlink_metadata(e.path()).unwrap();
        let content = if m.is_file() {
            fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        out.insert(
            e.path().to_path_buf(),
            (m.is_dir(), m.mode(), content, m.mtime(), m.mtime_nsec()),
        );
    }
    out
}

fn assert_unchanged(before: &Fingerprint, after: &Fingerprint) {
    let changed: Vec<&PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(changed.is_empty(), "changed by reading: {changed:?}");
}

fn make_writable(p: &Path) {
    fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap();
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn loose_file(git_dir: &Path, oid: &ObjectId) -> PathBuf {
    let h = oid.to_hex();
    git_dir.join("objects").join(&h[..2]).join(&h[2..])
}

/// Moves every pack out of the way and explodes it into loose objects.
fn explode_to_loose(env: &Env, repo: &Path) {
    let git_dir = repo.join(".git");
    for idx in files_with_ext(&pack_dir(&git_dir), "idx") {
        let pack = idx.with_extension("pack");
        let data = fs::read(&pack).unwrap();
        fs::remove_file(&pack).unwrap();
        fs::remove_file(&idx).unwrap();
        env.git_io(repo, &["unpack-objects", "-q"], &data);
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn loose_only_repository() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 1);
    explode_to_loose(&env, &repo);
    let git_dir = repo.join(".git");
    assert!(files_with_ext(&pack_dir(&git_dir), "idx").is_empty());
    assert!(loose_count(&git_dir) > 200);
    let n = check_all(&env, &repo, &git_dir);
    assert!(n > 180, "{n}");
}

#[test]
fn packed_repository_with_deep_ofs_delta_chains() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 2);
    env.git(
        &repo,
        &["repack", "-adf", "-q", "--depth=50", "--window=50"],
    );
    env.git(&repo, &["prune-packed"]);
    let git_dir = repo.join(".git");
    assert_eq!(loose_count(&git_dir), 0);
    let (ofs, rf, _) = pack_entry_types(&git_dir);
    assert!(ofs > 100, "ofs deltas: {ofs}");
    assert_eq!(rf, 0);
    let depth = max_chain(&env, &git_dir);
    assert!(depth >= 30, "max chain {depth}");
    check_all(&env, &repo, &git_dir);
}

#[test]
fn ref_delta_pack() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 3);
    explode_to_loose(&env, &repo);
    let list = env.git(&repo, &["rev-list", "--objects", "--all"]);
    env.git_io(
        &repo,
        &[
            "pack-objects",
            "-q",
            "--window=50",
            "--depth=50",
            ".git/objects/pack/pack",
        ],
        &list,
    );
    env.git(&repo, &["prune-packed"]);
    let git_dir = repo.join(".git");
    let (ofs, rf, _) = pack_entry_types(&git_dir);
    assert_eq!(ofs, 0);
    assert!(rf > 100, "ref deltas: {rf}");
    assert!(max_chain(&env, &git_dir) >= 30);
    check_all(&env, &repo, &git_dir);
}

#[test]
fn index_version_1_and_large_offset_table() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 4);
    let git_dir = repo.join(".git");
    env.git(
        &repo,
        &[
            "-c",
            "pack.indexVersion=1",
            "repack",
            "-adf",
            "-q",
            "--depth=50",
        ],
    );
    let idx = files_with_ext(&pack_dir(&git_dir), "idx");
    assert_eq!(idx.len(), 1);
    assert_ne!(
        &fs::read(&idx[0]).unwrap()[..4],
        b"\xfftOc",
        "expected a v1 index"
    );
    check_all(&env, &repo, &git_dir);

    // Offsets above 256 go to the 8-byte table.
    let repo2 = make_repo(&env, "r2", 4);
    let git_dir2 = repo2.join(".git");
    let list2 = env.git(&repo2, &["rev-list", "--objects", "--all"]);
    env.git_io(
        &repo2,
        &[
            "pack-objects",
            "-q",
            "--delta-base-offset",
            "--index-version=2,256",
            ".git/objects/pack/big",
        ],
        &list2,
    );
    for p in files_with_ext(&pack_dir(&git_dir2), "idx") {
        if !p.file_name().unwrap().to_string_lossy().starts_with("big") {
            fs::remove_file(p.with_extension("pack")).unwrap();
            fs::remove_file(&p).unwrap();
        }
    }
    let idx = files_with_ext(&pack_dir(&git_dir2), "idx");
    assert_eq!(idx.len(), 1);
    let d = fs::read(&idx[0]).unwrap();
    let n = u32::from_be_bytes(d[8 + 255 * 4..8 + 256 * 4].try_into().unwrap()) as usize;
    let large = (d.len() - (8 + 1024 + n * 28 + 40)) / 8;
    assert!(large > n / 2, "large offsets: {large} of {n}");
    check_all(&env, &repo2, &git_dir2);
}

#[test]
fn mixed_loose_and_packed() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 5);
    env.git(&repo, &["repack", "-ad", "-q"]);
    add_loose_commits(&env, &repo, "mixed", 8);
    // A second pack on top of the first, and more loose objects after it.
    env.git(&repo, &["repack", "-d", "-q"]);
    add_loose_commits(&env, &repo, "after", 4);
    let git_dir = repo.join(".git");
    assert_eq!(files_with_ext(&pack_dir(&git_dir), "idx").len(), 2);
    assert!(loose_count(&git_dir) > 10);
    check_all(&env, &repo, &git_dir);
}

#[test]
fn alternates_absolute_relative_and_chained() {
    let env = Env::new();
    let a = make_repo(&env, "a", 6);
    env.git(&a, &["repack", "-adf", "-q", "--depth=50", "--window=50"]);
    add_loose_commits(&env, &a, "a", 3);

    // B shares A's objects (absolute path in B's alternates).
    env.git(&env.root, &["clone", "-q", "-s", "a", "b"]);
    let b = env.root.join("b");
    assert!(b.join(".git/objects/info/alternates").exists());
    add_loose_commits(&env, &b, "b", 3);
    // C shares B's, which shares A's.
    env.git(&env.root, &["clone", "-q", "-s", "b", "c"]);
    let c = env.root.join("c");
    add_loose_commits(&env, &c, "c", 2);
    env.git(&c, &["repack", "-d", "-l", "-q"]);

    check_all(&env, &b, &b.join(".git"));
    check_all(&env, &c, &c.join(".git"));
    let store = ObjectStore::open(&c.join(".git")).unwrap();
    assert_eq!(store.object_dirs().len(), 3);

    // D names A's objects with a relative, C-quoted path and a comment.
    let d = env.root.join("d");
    fs::create_dir(&d).unwrap();
    env.git(&d, &["init", "-q"]);
    fs::write(
        d.join(".git/objects/info/alternates"),
        "# comment\n\n\"../../../a/.git/objects\"\n/nonexistent/objects\n",
    )
    .unwrap();
    let a_objects = git_objects(&env, &a);
    let before = fingerprint(&env.root);
    let store = ObjectStore::open(&d.join(".git")).unwrap();
    check_against(&store, &a_objects);
    assert_unchanged(&before, &fingerprint(&env.root));
}

#[test]
fn linked_worktree() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 7);
    env.git(&repo, &["repack", "-ad", "-q"]);
    env.git(&repo, &["worktree", "add", "-q", "../wt"]);
    let wt = env.root.join("wt");
    add_loose_commits(&env, &wt, "wt", 3);
    let n = check_all(&env, &wt, &repo.join(".git/worktrees/wt"));
    // The worktree's `.git` file works too.
    assert_eq!(check_all(&env, &wt, &wt.join(".git")), n);
}

#[test]
fn missing_objects_and_non_blobs() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 8);
    let git_dir = repo.join(".git");
    add_loose_commits(&env, &repo, "x", 1);
    let store = ObjectStore::open(&git_dir).unwrap();
    let missing = ObjectId::from_bytes([0x5a; 20]);
    assert_eq!(store.read_blob(&missing).unwrap(), None);
    assert_eq!(store.read_object(&missing).unwrap(), None);
    assert!(!store.contains(&missing));
    // An object whose id starts with 0x00 / 0xff fanout edges.
    assert_eq!(
        store.read_blob(&ObjectId::from_bytes([0; 20])).unwrap(),
        None
    );
    assert_eq!(
        store.read_blob(&ObjectId::from_bytes([0xff; 20])).unwrap(),
        None
    );

    let tree = ObjectId::from_hex(
        String::from_utf8(env.git(&repo, &["rev-parse", "HEAD^{tree}"]))
            .unwrap()
            .trim(),
    )
    .unwrap();
    let packed_tree = ObjectId::from_hex(
        String::from_utf8(env.git(&repo, &["rev-parse", "HEAD~1^{tree}"]))
            .unwrap()
            .trim(),
    )
    .unwrap();
    for t in [tree, packed_tree] {
        let e = store.read_blob(&t).unwrap_err();
        assert!(e.to_string().contains("not a blob"), "{e}");
        assert_eq!(store.read_object(&t).unwrap().unwrap().0, ObjectKind::Tree);
    }
    // Not a repository.
    assert!(ObjectStore::open(&env.root.join("nope")).is_err());
    assert!(ObjectStore::open(&env.home).is_err());
}

#[test]
fn corrupt_loose_objects_are_errors() {
    let env = Env::new();
    let repo = env.root.join("r");
    fs::create_dir(&repo).unwrap();
    env.git(&repo, &["init", "-q"]);
    let git_dir = repo.join(".git");
    let content = b"some content\0with a nul\n".repeat(50);
    let oid = object_id(ObjectKind::Blob, &content);
    let path = loose_file(&git_dir, &oid);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut header = format!("blob {}\0", content.len()).into_bytes();
    header.extend_from_slice(&content);
    let good = zlib(&header);

    let store = ObjectStore::open(&git_dir).unwrap();
    fs::write(&path, &good).unwrap();
    assert_eq!(
        store.read_blob(&oid).unwrap().as_deref(),
        Some(&content[..])
    );

    let mut wrong_content = header.clone();
    let last = wrong_content.len() - 1;
    wrong_content[last] ^= 1;
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x55;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"this is not zlib at all".to_vec()),
        ("empty file", Vec::new()),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("flipped byte", flipped),
        ("wrong content", zlib(&wrong_content)),
        ("short", zlib(&header[..header.len() - 3])),
        ("long", zlib(&[&header[..], b"xx"].concat())),
        ("bad type", zlib(b"blub 3\0abc")),
        ("bad size", zlib(b"blob 3x\0abc")),
        ("no nul", zlib(&[b'b'; 200])),
        ("absurd size", zlib(b"blob 99999999999999999\0abc")),
        (
            "huge size digits",
            zlib(b"blob 999999999999999999999999999\0abc"),
        ),
    ];
    for (what, bytes) in cases {
        make_writable(&path);
        fs::write(&path, &bytes).unwrap();
        let r = store.read_blob(&oid);
        assert!(matches!(r, Err(Error::Git { .. })), "{what}: {r:?}");
        // contains() only checks existence.
        assert!(store.contains(&oid));
    }
    // A tree stored under a blob's id is a hash mismatch, not a type error.
    fs::write(&path, zlib(&[b"tree 0\0".as_slice()].concat())).unwrap();
    assert!(store.read_blob(&oid).is_err());
}

/// Reads every object of `objects` through a fresh store: each result must be the right
/// content, an error or (only when `allow_none`) a miss — never wrong data, never a panic.
fn read_all_tolerant(
    git_dir: &Path,
    objects: &BTreeMap<ObjectId, (String, Vec<u8>)>,
    allow_none: bool,
) -> (usize, usize) {
    let store = match ObjectStore::open(git_dir) {
        Ok(s) => s,
        Err(_) => return (0, objects.len()),
    };
    let (mut ok, mut err) = (0, 0);
    for (oid, (kind, data)) in objects {
        let _ = store.contains(oid);
        match store.read_object(oid) {
            Ok(Some((k, d))) => {
                assert_eq!(k.as_str(), kind);
                assert!(d == *data, "wrong data for {oid}");
                ok += 1;
            }
            Ok(None) => {
                assert!(allow_none, "{oid} reported missing");
                err += 1;
            }
            Err(_) => err += 1,
        }
    }
    (ok, err)
}

#[test]
fn truncated_or_corrupt_packs_are_errors() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 9);
    env.git(
        &repo,
        &["repack", "-adf", "-q", "--depth=50", "--window=50"],
    );
    env.git(&repo, &["prune-packed"]);
    let git_dir = repo.join(".git");
    let objects = git_objects(&env, &repo);
    let pack = files_with_ext(&pack_dir(&git_dir), "pack").remove(0);
    let idx = pack.with_extension("idx");
    make_writable(&pack);
    make_writable(&idx);
    let pack_bytes = fs::read(&pack).unwrap();
    let idx_bytes = fs::read(&idx).unwrap();
    let some_blob = *objects.iter().find(|(_, (k, _))| k == "blob").unwrap().0;

    // Truncated pack: open works, reads fail, contains() is false.
    fs::write(&pack, &pack_bytes[..pack_bytes.len() / 2]).unwrap();
    let store = ObjectStore::open(&git_dir).unwrap();
    let e = store.read_blob(&some_blob).unwrap_err();
    assert!(matches!(e, Error::Git { .. }), "{e}");
    assert!(!store.contains(&some_blob));
    // Even a missing object is an error now: the broken pack might hold it.
    assert!(store.read_blob(&ObjectId::from_bytes([0x5a; 20])).is_err());

    // Truncated index.
    fs::write(&pack, &pack_bytes).unwrap();
    fs::write(&idx, &idx_bytes[..idx_bytes.len() - 10]).unwrap();
    assert!(ObjectStore::open(&git_dir)
        .unwrap()
        .read_blob(&some_blob)
        .is_err());

    // Corrupt object data in the middle of the pack (trailer intact): the affected objects
    // fail, nothing is wrong, nothing panics.
    fs::write(&idx, &idx_bytes).unwrap();
    let mut bad = pack_bytes.clone();
    for i in (pack_bytes.len() / 3..pack_bytes.len() / 3 + 64).step_by(3) {
        bad[i] ^= 0xa5;
    }
    fs::write(&pack, &bad).unwrap();
    let (ok, err) = read_all_tolerant(&git_dir, &objects, false);
    assert!(err > 0 && ok > 0, "ok {ok} err {err}");

    // A pack without its .pack file is ignored (as git does), index-only.
    fs::remove_file(&pack).unwrap();
    let store = ObjectStore::open(&git_dir).unwrap();
    assert_eq!(store.read_blob(&some_blob).unwrap(), None);
}

#[test]
fn byte_flips_and_truncations_never_panic_or_lie() {
    let env = Env::new();
    // A small repository so every byte can be tried.
    let repo = env.root.join("r");
    fs::create_dir(&repo).unwrap();
    env.git(&repo, &["init", "-q"]);
    let mut text = String::new();
    for i in 0..12 {
        text.push_str(&format!(
            "line {i} of a file that changes a little each time\n"
        ));
        fs::write(repo.join("f.txt"), &text).unwrap();
        fs::write(repo.join("g.bin"), [i as u8, 0, 1, 2, 0].repeat(30 + i)).unwrap();
        env.git(&repo, &["add", "-A"]);
        env.git(&repo, &["commit", "-q", "-m", &format!("{i}")]);
    }
    env.git(
        &repo,
        &["repack", "-adf", "-q", "--depth=50", "--window=50"],
    );
    env.git(&repo, &["prune-packed"]);
    let git_dir = repo.join(".git");
    let objects = git_objects(&env, &repo);
    let (ofs, _, _) = pack_entry_types(&git_dir);
    assert!(ofs > 5);
    let pack = files_with_ext(&pack_dir(&git_dir), "pack").remove(0);
    let idx = pack.with_extension("idx");
    make_writable(&pack);
    make_writable(&idx);
    let pack_bytes = fs::read(&pack).unwrap();
    let idx_bytes = fs::read(&idx).unwrap();

    let step = (pack_bytes.len() / 400).max(1);
    let mut errors = 0;
    for pos in (0..pack_bytes.len()).step_by(step) {
        for x in [0x01u8, 0x80] {
            let mut b = pack_bytes.clone();
            b[pos] ^= x;
            fs::write(&pack, &b).unwrap();
            errors += read_all_tolerant(&git_dir, &objects, false).1;
        }
    }
    for len in (0..pack_bytes.len()).step_by(step * 4) {
        fs::write(&pack, &pack_bytes[..len]).unwrap();
        read_all_tolerant(&git_dir, &objects, false);
    }
    fs::write(&pack, &pack_bytes).unwrap();
    for pos in (0..idx_bytes.len()).step_by((idx_bytes.len() / 400).max(1)) {
        let mut b = idx_bytes.clone();
        b[pos] ^= 0x81;
        fs::write(&idx, &b).unwrap();
        read_all_tolerant(&git_dir, &objects, true);
    }
    for len in (0..idx_bytes.len()).step_by(37) {
        fs::write(&idx, &idx_bytes[..len]).unwrap();
        read_all_tolerant(&git_dir, &objects, false);
    }
    assert!(errors > 0);
    fs::write(&idx, &idx_bytes).unwrap();
    assert_eq!(read_all_tolerant(&git_dir, &objects, false).1, 0);
}

#[test]
fn ref_delta_base_outside_the_pack() {
    // A hand-made pack with one REF_DELTA entry whose base is a loose object.
    let env = Env::new();
    let repo = env.root.join("r");
    fs::create_dir(&repo).unwrap();
    env.git(&repo, &["init", "-q"]);
    let base = b"base content line\n".repeat(100);
    let base_hex =
        String::from_utf8(env.git_io(&repo, &["hash-object", "-w", "--stdin"], &base)).unwrap();
    let base_oid = ObjectId::from_hex(base_hex.trim()).unwrap();
    let mut target = base.clone();
    target.extend_from_slice(b"tail");
    let target_oid = object_id(ObjectKind::Blob, &target);

    // delta: src size, tgt size, copy(0, len(base)), insert "tail"
    let mut delta = Vec::new();
    for mut v in [base.len() as u64, target.len() as u64] {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                delta.push(b);
                break;
            }
            delta.push(b | 0x80);
        }
    }
    let n = base.len() as u32;
    delta.extend_from_slice(&[0x80 | 0x10 | 0x20, n as u8, (n >> 8) as u8]);
    delta.extend_from_slice(&[4, b't', b'a', b'i', b'l']);

    let mut pack = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
    let mut size = delta.len();
    let mut c = (7u8 << 4) | (size & 15) as u8;
    size >>= 4;
    while size > 0 {
        pack.push(c | 0x80);
        c = (size & 0x7f) as u8;
        size >>= 7;
    }
    pack.push(c);
    pack.extend_from_slice(base_oid.as_bytes());
    pack.extend_from_slice(&zlib(&delta));
    let ck: [u8; 20] = {
        use sha1::Digest;
        sha1::Sha1::digest(&pack).into()
    };
    pack.extend_from_slice(&ck);
    let mut idx = b"\xfftOc\0\0\0\x02".to_vec();
    for b in 0..256usize {
        let n = u32::from(b >= target_oid.as_bytes()[0] as usize);
        idx.extend_from_slice(&n.to_be_bytes());
    }
    idx.extend_from_slice(target_oid.as_bytes());
    idx.extend_from_slice(&[0; 4]);
    idx.extend_from_slice(&12u32.to_be_bytes());
    idx.extend_from_slice(&ck);
    idx.extend_from_slice(&[0; 20]);
    let pd = pack_dir(&repo.join(".git"));
    fs::write(pd.join("pack-handmade.pack"), &pack).unwrap();
    fs::write(pd.join("pack-handmade.idx"), &idx).unwrap();

    // (git itself only resolves REF_DELTA bases inside the same pack and calls this pack
    // corrupt; the reader is lenient, and the SHA-1 check vouches for the result.)
    let store = ObjectStore::open(&repo.join(".git")).unwrap();
    assert_eq!(store.read_blob(&target_oid).unwrap(), Some(target));
    // Without the base the delta cannot be resolved: an error, not a miss.
    fs::remove_file(loose_file(&repo.join(".git"), &base_oid)).unwrap();
    let store = ObjectStore::open(&repo.join(".git")).unwrap();
    let e = store.read_blob(&target_oid).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
}

#[test]
fn packs_appearing_after_open_are_found() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 10);
    explode_to_loose(&env, &repo);
    let git_dir = repo.join(".git");
    let store = ObjectStore::open(&git_dir).unwrap();
    let objects = git_objects(&env, &repo);
    // gc packs every loose object and deletes the loose files.
    env.git(&repo, &["gc", "-q", "--prune=now"]);
    assert_eq!(loose_count(&git_dir), 0);
    add_loose_commits(&env, &repo, "new", 2);
    env.git(&repo, &["repack", "-d", "-q"]);
    env.git(&repo, &["prune-packed"]);
    check_against(&store, &objects);
    check_against(&store, &git_objects(&env, &repo));

    // A store that already knows packs survives `repack -adf` (old packs deleted).
    let store = ObjectStore::open(&git_dir).unwrap();
    add_loose_commits(&env, &repo, "newer", 2);
    env.git(&repo, &["repack", "-adf", "-q"]);
    env.git(&repo, &["prune-packed"]);
    check_against(&store, &git_objects(&env, &repo));

    // So does a lookup taken before the repack: a miss in the packs it knows looks again.
    let store = ObjectStore::open(&git_dir).unwrap();
    let lookup = store.lookup();
    add_loose_commits(&env, &repo, "newest", 2);
    env.git(&repo, &["repack", "-adf", "-q"]);
    env.git(&repo, &["prune-packed"]);
    assert_eq!(loose_count(&git_dir), 0);
    let all = git_objects(&env, &repo);
    let missed: Vec<_> = all.keys().filter(|oid| !lookup.contains(oid)).collect();
    assert!(missed.is_empty(), "not found: {missed:?}");
    assert!(!lookup.contains(&ObjectId::from_bytes([0x11; 20])));
}

#[test]
fn shared_across_threads_and_repository_untouched() {
    let env = Env::new();
    let repo = make_repo(&env, "r", 11);
    env.git(
        &repo,
        &["repack", "-adf", "-q", "--depth=50", "--window=50"],
    );
    env.git(&repo, &["prune-packed"]);
    add_loose_commits(&env, &repo, "t", 3);
    let objects = Arc::new(git_objects(&env, &repo));
    let before = fingerprint(&env.root);
    let store = Arc::new(ObjectStore::open(&repo.join(".git")).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let store = store.clone();
            let objects = objects.clone();
            std::thread::spawn(move || {
                for round in 0..3 {
                    let mut items: Vec<_> = objects.iter().collect();
                    if (t + round) % 2 == 1 {
                        items.reverse();
                    }
                    for (oid, (kind, data)) in items {
                        if kind == "blob" {
                            assert_eq!(store.read_blob(oid).unwrap().as_ref(), Some(data));
                        }
                        let mut miss = *oid.as_bytes();
                        miss[19] ^= 0xff;
                        let miss = ObjectId::from_bytes(miss);
                        if !objects.contains_key(&miss) {
                            assert_eq!(store.read_blob(&miss).unwrap(), None);
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    drop(store);
    assert_unchanged(&before, &fingerprint(&env.root));
}

#[test]
fn sha256_repository_is_refused() {
    let env = Env::new();
    let repo = env.root.join("r");
    fs::create_dir(&repo).unwrap();
    env.git(&repo, &["init", "-q", "--object-format=sha256"]);
    let e = ObjectStore::open(&repo.join(".git")).unwrap_err();
    assert!(e.to_string().contains("sha256"), "{e}");
}

/// Speed figure: all blobs of a packed repository of a few thousand source files, through
/// `ObjectStore` vs `git cat-file --batch`. Run with
/// `cargo test --release --test odb_oracle -- --ignored --nocapture bench`.
#[test]
#[ignore]
fn bench_read_all_blobs() {
    let env = Env::new();
    let repo = env.root.join("r");
    fs::create_dir(&repo).unwrap();
    env.git(&repo, &["init", "-q"]);
    env.git(&repo, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let src = home.join(".cargo/registry/src");
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "rs") {
            files.push(e.path().to_path_buf());
        }
        if files.len() >= 4000 {
            break;
        }
    }
    assert!(files.len() > 1000, "need sources under {}", src.display());
    // Two commits: the second edits every 3rd file, so the pack has deltas.
    let mut fi = FastImport::new();
    for round in 0..2 {
        let mut entries = Vec::new();
        for (i, f) in files.iter().enumerate() {
            if round == 1 && i % 3 != 0 {
                continue;
            }
            let mut data = fs::read(f).unwrap();
            if round == 1 {
                data.extend_from_slice(b"\n// edited\n");
            }
            let m = fi.blob(&data);
            entries.push((format!("f{i}.rs"), "100644", m));
        }
        fi.commit(&format!("round {round}"), &entries);
    }
    env.git_io(&repo, &["fast-import", "--quiet"], &fi.out);
    env.git(&repo, &["repack", "-adf", "-q"]);
    env.git(&repo, &["prune-packed"]);
    let git_dir = repo.join(".git");
    let check = env.git(&repo, &["cat-file", "--batch-all-objects", "--batch-check"]);
    let blobs: Vec<ObjectId> = String::from_utf8(check)
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some("blob"))
        .map(|l| ObjectId::from_hex(&l[..40]).unwrap())
        .collect();
    let total: u64 = fs::metadata(files_with_ext(&pack_dir(&git_dir), "pack")[0].clone())
        .unwrap()
        .len();

    let t = std::time::Instant::now();
    let store = ObjectStore::open(&git_dir).unwrap();
    let mut bytes = 0usize;
    for oid in &blobs {
        bytes += store.read_blob(oid).unwrap().unwrap().len();
    }
    let ours = t.elapsed();

    let input: String = blobs.iter().map(|o| o.to_hex() + "\n").collect();
    let t = std::time::Instant::now();
    let mut child = env
        .cmd(&repo, &["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let w = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    w.join().unwrap();
    child.wait().unwrap();
    let theirs = t.elapsed();
    assert!(out.len() > bytes);

    let (ofs, _, _) = pack_entry_types(&git_dir);
    println!(
        "{} blobs ({} MB, {} OFS_DELTA entries, pack {} MB): ObjectStore {:?}, git cat-file --batch {:?}",
        blobs.len(),
        bytes >> 20,
        ofs,
        total >> 20,
        ours,
        theirs
    );
}

/// Called per object of a `git cat-file --batch` stream: (oid, type, content).
type ObjectCheck<'a> = dyn FnMut(&ObjectId, &str, &[u8]) + 'a;

/// Every object of an existing repository (read-only), compared with git and timed:
/// `ODB_ORACLE_REPO=/path/to/work/tree cargo test --release --test odb_oracle -- --ignored
/// --nocapture real_repository`.
#[test]
#[ignore]
fn real_repository_from_env() {
    let Some(repo) = std::env::var_os("ODB_ORACLE_REPO").map(PathBuf::from) else {
        eprintln!("ODB_ORACLE_REPO not set; skipped");
        return;
    };
    let env = Env::new();
    let list = env.git(&repo, &["cat-file", "--batch-all-objects", "--batch-check"]);
    let oids: Vec<ObjectId> = String::from_utf8(list)
        .unwrap()
        .lines()
        .map(|l| ObjectId::from_hex(&l[..40]).unwrap())
        .collect();
    let git_dir = PathBuf::from(
        String::from_utf8(env.git(&repo, &["rev-parse", "--absolute-git-dir"]))
            .unwrap()
            .trim(),
    );
    let before = fingerprint(&git_dir);

    // git: all objects through one `cat-file --batch`, output read and dropped.
    let batch = |check: &mut ObjectCheck| {
        let mut child = env
            .cmd(&repo, &["cat-file", "--batch-all-objects", "--batch"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut r = std::io::BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let mut line = Vec::new();
        let mut data = Vec::new();
        loop {
            line.clear();
            if std::io::BufRead::read_until(&mut r, b'\n', &mut line).unwrap() == 0 {
                break;
            }
            let head = std::str::from_utf8(&line).unwrap().trim_end().to_string();
            let mut parts = head.split(' ');
            let oid = ObjectId::from_hex(parts.next().unwrap()).unwrap();
            let kind = parts.next().unwrap().to_string();
            let size: usize = parts.next().unwrap().parse().unwrap();
            data.resize(size + 1, 0);
            r.read_exact(&mut data).unwrap();
            check(&oid, &kind, &data[..size]);
        }
        assert!(child.wait().unwrap().success());
    };
    let t = std::time::Instant::now();
    let mut git_bytes = 0usize;
    batch(&mut |_, _, d| git_bytes += d.len());
    let theirs = t.elapsed();

    let t = std::time::Instant::now();
    let store = ObjectStore::open(&git_dir).unwrap();
    let mut bytes = 0usize;
    for oid in &oids {
        bytes += store.read_object(oid).unwrap().unwrap().1.len();
    }
    let ours = t.elapsed();
    assert_eq!(bytes, git_bytes);

    let mut n = 0;
    batch(&mut |oid, kind, d| {
        let (k, ours) = store.read_object(oid).unwrap().unwrap();
        assert_eq!(k.as_str(), kind);
        assert!(ours == d, "{oid}");
        n += 1;
    });
    assert_eq!(n, oids.len());
    assert_unchanged(&before, &fingerprint(&git_dir));
    println!(
        "{}: {} objects, {} MB: ObjectStore {:?}, git cat-file --batch {:?}",
        repo.display(),
        oids.len(),
        bytes >> 20,
        ours,
        theirs
    );
}
