//! Benchmark: what a sandbox's private git repository costs, and what `git status` costs in
//! it, on a git project (e.g. the Linux tree: `../shared/corpus/linux-tree.sh DIR --git`).
//!
//! ```text
//! cargo run --release --example bench_git_view -- --tree DIR [--rounds N] [--root DIR] [--steps]
//! ```
//!
//! Rows, each the median of `N` rounds (default 5) in one run, wall and CPU (user + sys)
//! seconds, and ratios:
//!
//! * the first create of a session (base snapshot + sandbox), with the private repository
//!   and without it (`Options::no_git_repo`);
//! * a create after the base exists, with and without, alternating;
//! * `git status` in a fresh sandbox against `git --no-optional-locks status` in the
//!   project itself (which never writes the project's index), alternating; and `git
//!   diff-files` in the sandbox (0 files stat-dirty means git reads none).
//!
//! `--steps` first times the private repository's own steps in this process, without making
//! sandboxes (whose copy of the tree dwarfs them, and on a loaded machine drowns them in
//! noise): preparing the snapshot repository of a clean checkout (index read, every tree
//! hashed and looked up in the user's store, refs), `lstat` of every file (what a sandbox
//! made without a manifest, an overlay, pays), and writing a `.git` (index with stat data,
//! `HEAD`, refs, config); then `git status` with that `.git` over the project's own files
//! (`GIT_DIR`, `GIT_WORK_TREE`) against `git status` in the project. `--steps-only` stops
//! there.
//!
//! The project is only read. Sandboxes go under `--root` (default: a temporary directory).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use patchbox::fs::state_dir::path_in_state_dir;
use patchbox::git::index::{read_index, LStat};
use patchbox::git::odb::ObjectStore;
use patchbox::git::oid::ObjectKind;
use patchbox::git::private::objects::LooseWriter;
use patchbox::git::private::{SnapshotRepo, TreeEntry};
use patchbox::{Options, SandboxManager};

/// Wall time and CPU time (user + sys) of this process and its children.
#[derive(Clone, Copy, Default)]
struct Cost {
    wall: f64,
    cpu: f64,
}

fn cpu_now() -> f64 {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills the struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        total += tv(ru.ru_utime) + tv(ru.ru_stime);
    }
    total
}

fn measure<T>(f: impl FnOnce() -> T) -> (T, Cost) {
    let (c0, t0) = (cpu_now(), Instant::now());
    let out = f();
    let wall = t0.elapsed().as_secs_f64();
    (
        out,
        Cost {
            wall,
            cpu: cpu_now() - c0,
        },
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn row(name: &str, a: &[Cost], b: &[Cost], b_name: &str) {
    let wa = median(a.iter().map(|c| c.wall).collect());
    let wb = median(b.iter().map(|c| c.wall).collect());
    let ca = median(a.iter().map(|c| c.cpu).collect());
    let cb = median(b.iter().map(|c| c.cpu).collect());
    let ratio_w = median(a.iter().zip(b).map(|(x, y)| x.wall / y.wall).collect());
    let ratio_c = median(a.iter().zip(b).map(|(x, y)| x.cpu / y.cpu).collect());
    println!(
        "{name:<44} wall {:>8.1} ms  cpu {:>8.1} ms | {b_name:<28} wall {:>8.1} ms  cpu {:>8.1} ms | ratio wall {ratio_w:.3} cpu {ratio_c:.3}  (+{:.1} ms wall)",
        wa * 1e3,
        ca * 1e3,
        wb * 1e3,
        cb * 1e3,
        (wa - wb) * 1e3
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed in {}",
        dir.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn manager(project: &Path, root: &Path, no_git_repo: bool) -> SandboxManager {
    SandboxManager::with_options(
        project,
        Options {
            root: Some(root.to_path_buf()),
            no_prune_on_start: true,
            no_git_repo,
            ..Options::default()
        },
    )
    .expect("manager")
}

/// Lets the disk write back what the last step wrote, so no step pays for the one before.
fn settle() {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::thread::sleep(Duration::from_millis(300));
}

fn single(name: &str, a: &[Cost]) {
    let w = median(a.iter().map(|c| c.wall).collect());
    let c = median(a.iter().map(|c| c.cpu).collect());
    println!(
        "{name:<44} wall {:>8.1} ms  cpu {:>8.1} ms",
        w * 1e3,
        c * 1e3
    );
}

/// The `--steps` rows (see the module documentation).
fn steps(tree: &Path, rounds: usize) {
    let repo = patchbox::git::repo::discover_repo(tree)
        .expect("discover")
        .expect("a git project");
    let odb = ObjectStore::open(&repo.git_dir).expect("object store");
    let tmp = tempfile::tempdir().expect("temp dir");
    let session = tmp.path().canonicalize().expect("temp dir");
    let at = |name: String| path_in_state_dir(&session, &session.join(name)).expect("path");
    let (mut prep, mut stat, mut write) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    let mut last_view = None;
    for r in 0..rounds {
        let (view, c) = measure(|| {
            let entries: Vec<TreeEntry> = read_index(&repo.index_file)
                .expect("index")
                .into_iter()
                .filter(|e| e.stage() == 0)
                .filter_map(|e| {
                    Some(TreeEntry {
                        path: patchbox::RelPath::from_bytes(&e.path).ok()?,
                        mode: e.mode,
                        oid: e.oid,
                        skip_worktree: false,
                    })
                })
                .collect();
            let w = LooseWriter::new(at(format!("objects-{r}")), Some(&odb));
            SnapshotRepo::prepare(&repo, &odb, entries, &w, 0).expect("prepare")
        });
        prep.push(c);
        let (stats, c) = measure(|| {
            view.entries()
                .iter()
                .map(|e| {
                    std::fs::symlink_metadata(tree.join(e.path.as_path()))
                        .ok()
                        .map(|m| LStat::from_metadata(&m))
                })
                .collect::<Vec<_>>()
        });
        stat.push(c);
        let dot = at(format!("git-{r}"));
        let (_, c) = measure(|| view.write_into(&dot, &|i| stats[i]).expect("write"));
        write.push(c);
        last = Some(dot.as_path().to_path_buf());
        last_view = Some(view);
    }
    // A dirty snapshot also writes the blobs of its modified and untracked files (and the
    // trees above them): the cost of 1,000 files of the tree written as new blobs.
    let mut dirty_costs = Vec::new();
    let files: Vec<&TreeEntry> = last_view
        .as_ref()
        .map(|v: &SnapshotRepo| {
            v.entries()
                .iter()
                .filter(|e| e.mode == 0o100644)
                .take(1000)
                .collect()
        })
        .unwrap_or_default();
    let mut bytes = 0u64;
    for r in 0..rounds {
        let w = LooseWriter::new(at(format!("dirty-{r}")), None);
        let (n, c) = measure(|| {
            let mut n = 0u64;
            for e in &files {
                let data = std::fs::read(tree.join(e.path.as_path())).expect("read");
                n += data.len() as u64;
                w.write(ObjectKind::Blob, &data).expect("write blob");
            }
            n
        });
        bytes = n;
        dirty_costs.push(c);
    }
    single("prepare the snapshot repository (per session)", &prep);
    single(
        &format!("+ 1,000 dirty files ({} KB) as new blobs", bytes / 1024),
        &dirty_costs,
    );
    single("lstat every file (sandboxes without manifest)", &stat);
    single("write .git (per sandbox)", &write);
    let Some(dot) = last else { return };
    let private = |args: &[&str]| {
        let out = Command::new("git")
            .arg("--no-optional-locks")
            .args(args)
            .env("GIT_DIR", &dot)
            .env("GIT_WORK_TREE", tree)
            .current_dir(tree)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} with the private .git failed"
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dirty = private(&["diff-files", "--name-only"]).lines().count();
    println!(
        "git diff-files with the private index: {dirty} files stat-dirty (git reads none when 0)"
    );
    let project = |args: &[&str]| git(tree, &[&["--no-optional-locks"], args].concat());
    private(&["status", "--porcelain"]);
    project(&["status", "--porcelain"]);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(measure(|| private(&["status", "--porcelain"])).1);
        b.push(measure(|| project(&["status", "--porcelain"])).1);
    }
    row(
        "git status with the private .git",
        &a,
        &b,
        "git status in the project",
    );
}

/// Runs `step` `rounds` times with each manager, alternating which goes first, each step
/// after the disk settled; returns the costs with `with`, then with `without`.
fn alternate(
    rounds: usize,
    with: &SandboxManager,
    without: &SandboxManager,
    step: impl Fn(&SandboxManager, &str) -> Cost,
) -> (Vec<Cost>, Vec<Cost>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let id = format!("r{r}");
        for no_git in [r % 2 == 1, r % 2 == 0] {
            settle();
            if no_git {
                b.push(step(without, &id));
            } else {
                a.push(step(with, &id));
            }
        }
    }
    (a, b)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let Some(tree) = get("--tree").map(PathBuf::from) else {
        eprintln!("usage: bench_git_view --tree DIR [--rounds N] [--root DIR]");
        std::process::exit(2);
    };
    let rounds: usize = get("--rounds").and_then(|r| r.parse().ok()).unwrap_or(5);
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = get("--root")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    println!(
        "tree {} ({} tracked files), {rounds} rounds, medians; cpu = user+sys of this process and its children",
        tree.display(),
        git(&tree, &["--no-optional-locks", "ls-files"]).lines().count()
    );
    if args.iter().any(|a| a == "--steps" || a == "--steps-only") {
        steps(&tree, rounds);
        if args.iter().any(|a| a == "--steps-only") {
            return;
        }
    }

    // First create of a session: base + sandbox, with and without the private repository.
    let (mut first_with, mut first_without) = (Vec::new(), Vec::new());
    for r in 0..rounds.min(3) {
        for no_git in [r % 2 == 1, r % 2 == 0] {
            settle();
            let mgr = manager(&tree, &root, no_git);
            let (_, c) = measure(|| mgr.create_sandbox("first", None).expect("create"));
            if no_git {
                first_without.push(c);
            } else {
                first_with.push(c);
            }
            drop(mgr);
        }
    }
    row(
        "first create (base + sandbox), with .git",
        &first_with,
        &first_without,
        "without (no_git_repo)",
    );

    // Creates after the base exists.
    let with = manager(&tree, &root, false);
    let without = manager(&tree, &root, true);
    let keep_w = with.create_sandbox("warm", None).expect("create");
    let keep_wo = without.create_sandbox("warm", None).expect("create");
    let (cw, cwo) = alternate(rounds, &with, &without, |mgr, id| {
        let (sb, c) = measure(|| mgr.create_sandbox(id, None).expect("create"));
        mgr.discard_sandbox(&sb).expect("discard");
        c
    });
    row(
        "create after the base, with .git",
        &cw,
        &cwo,
        "without (no_git_repo)",
    );
    let from = |mgr: &SandboxManager| {
        if std::ptr::eq(mgr, &with) {
            keep_w.clone()
        } else {
            keep_wo.clone()
        }
    };
    let (chw, chwo) = alternate(rounds.min(3), &with, &without, |mgr, id| {
        let (sb, c) = measure(|| mgr.create_sandbox(id, Some(&from(mgr))).expect("create"));
        mgr.discard_sandbox(&sb).expect("discard");
        c
    });
    row(
        "chained create, with .git",
        &chw,
        &chwo,
        "without (no_git_repo)",
    );

    // git status in the sandbox against git status in the project.
    let dirty = git(&keep_w.path, &["diff-files", "--name-only"])
        .lines()
        .count();
    println!("git diff-files in a fresh sandbox: {dirty} files stat-dirty (git reads none when 0)");
    let (mut sw, mut su) = (Vec::new(), Vec::new());
    // One warm-up of each (the page cache; git may write the sandbox's index once).
    git(&keep_w.path, &["status", "--porcelain"]);
    git(&tree, &["--no-optional-locks", "status", "--porcelain"]);
    for _ in 0..rounds {
        let (_, a) = measure(|| git(&keep_w.path, &["status", "--porcelain"]));
        let (_, b) = measure(|| git(&tree, &["--no-optional-locks", "status", "--porcelain"]));
        sw.push(a);
        su.push(b);
    }
    row(
        "git status in the sandbox",
        &sw,
        &su,
        "git status in the project",
    );
    let n = git(&keep_w.path, &["status", "--porcelain"])
        .lines()
        .count();
    println!("git status in the sandbox lists {n} paths");
}
