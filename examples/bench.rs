//! Benchmark: patchbox beside the reference engine's steps done with public tools, in one run,
//! medians of several rounds, printed as ratios.
//!
//! ```text
//! cargo run --release --example bench -- --tree DIR [--rounds N] [--work DIR] [--small N]
//!     [--ext4-image] [--skip-large]
//!     [--plan | --plan-commit | --plan-diff | --apply-only | --run-only]
//!     [--isolation [--session20]]
//! ```
//! The rows of the default run measure the copy path (`Isolation::Copy`, and
//! `PATCHBOX_ISOLATION=copy` for `patchbox run`), as their targets were set for it.
//! `--isolation` runs only the isolation rows (see `bench_isolation/mod.rs`): overlay create,
//! chained create and finalize of 100 edits against the copy path and `cp -a`, peak RSS; with
//! `--session20` also 20 delegations against `git worktree add` / `git diff` / `remove`.
//! `--plan` runs only the plan-sandbox rows (they also end the default run, unless
//! `--skip-large`): on `DIR`, `prepare_snapshot` once, then per round `overlay` create (with
//! the prepared lower) vs `copy_on_write` create vs `git worktree add` vs `cp -a` of the
//! snapshot; 100 edits in each, then overlay diff vs copy_on_write diff vs
//! `git add -A -N . && git diff --binary` in the worktree vs `diff -rN` of the snapshot and
//! the edited `cp -a` copy (the full tree diff); and `commit_all` of 4 overlay sandboxes
//! over 4 copies of the `--small` project, 100 edits each, vs `git apply` of the same four
//! patches (4 processes, summed), and beside them the same four `git apply` followed by one
//! `syncfs` (the floor of a durable commit). `--plan-commit` runs only that last row
//! (`--commit-cow`: with `copy_on_write` sandboxes instead);
//! `--plan-diff` only the overlay diff and the `diff -rN` of the same edits.
//! `--apply-only` runs only the apply row (a 100-file patch on `DIR`, with its undo record, vs
//! `git apply`, and vs `git apply` followed by one `syncfs`; it applies and undoes in `DIR`
//! itself: give it a copy); `--run-only` only the one-shot `patchbox run` on the `--small` project vs
//! what worktree-based peers do (`git worktree add`, the tool, `git diff`, `git worktree
//! remove`). These rows print CPU time (user + system) beside wall time.
//! `--ext4-image` runs on a loop-mounted journaled ext4 image (as root) instead of `--work`'s
//! filesystem. No tree is deleted before a timed step that creates files (see `bench_tree`).
//! `--depth-only [--depths 10,1000,4000]` runs only the path-depth row: for each depth it
//! applies a patch creating one file at a path of that many components (`d/d/…/f`) to an
//! empty project and prints the time and the cost per component (planning and writing
//! should grow linearly with the depth; Linux's PATH_MAX does not apply, the engine walks
//! with directory descriptors).
//! `DIR` is a git project (e.g. `../shared/corpus/linux-tree.sh DIR --git`). The benchmark
//! also builds a smaller git project of the first `--small` files (default 20,000) of it.
//! Reference steps, as the reference engine does them: `git ls-files --cached --others
//! --exclude-standard` + per-file copy into `base/` (`cp --parents` in batches via xargs),
//! `cp -a base d-<id>`, `git diff --no-index --binary`, `rm -rf`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use patchbox::{Options, SandboxManager};

#[path = "bench_isolation/mod.rs"]
mod isolation;

fn sh(cmd: &str, cwd: &Path) -> Duration {
    let t = Instant::now();
    let st = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(cwd)
        .stdout(Stdio::null())
        .status()
        .expect("sh runs");
    let d = t.elapsed();
    // git diff --no-index exits 1 when trees differ.
    assert!(st.code().is_some_and(|c| c <= 1), "{cmd} failed: {st}");
    d
}

/// Flushes dirty pages before a timed step, so no step pays for the writeback of the one
/// before it (this VM's disk is slow; without it the figures follow the writeback).
/// Waits (up to 120 s) until no session is left under `root`.
fn wait_until_empty(root: &Path) {
    let start = Instant::now();
    while start.elapsed().as_secs() < 120 {
        // The shared lower layers of overlay sessions stay by design.
        let busy = fs::read_dir(root)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name() != patchbox::session::shared_lower::STORE_DIR)
            })
            .unwrap_or(false);
        if !busy {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Flushes dirty data and waits until the disks have been idle for half a second (at most
/// 30 s): every timed step starts from the same quiet state, instead of paying for the
/// write-back (or the discards) of the step before it.
fn settle() {
    settle_for(30);
}

/// [`settle`], waiting at most `max_secs` for the disks to go idle (the plan rows, on a
/// machine whose disk other jobs keep busy).
fn settle_for(max_secs: u64) {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    let busy_ms = || -> u64 {
        let Ok(dir) = fs::read_dir("/sys/block") else {
            return 0;
        };
        dir.filter_map(|e| e.ok())
            .filter_map(|e| fs::read_to_string(e.path().join("stat")).ok())
            // Field 10 of a block device's stat: milliseconds spent doing I/O.
            .filter_map(|s| s.split_whitespace().nth(9)?.parse::<u64>().ok())
            .sum()
    };
    let start = Instant::now();
    let mut last = busy_ms();
    while start.elapsed().as_secs() < max_secs {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let now = busy_ms();
        if now == last {
            break;
        }
        last = now;
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The files git tracks in `tree`.
fn ls_files(tree: &Path) -> Vec<PathBuf> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(tree)
        .output()
        .expect("git ls-files");
    out.stdout
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| PathBuf::from(String::from_utf8_lossy(s).into_owned()))
        .collect()
}

/// Runs `c` quietly; whether it ran and succeeded.
fn quiet_ok(c: &mut Command) -> bool {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn edit_list(tree: &Path, n: usize) -> Vec<PathBuf> {
    let files = ls_files(tree);
    let with = |exts: &[&str]| -> Vec<PathBuf> {
        files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| exts.iter().any(|x| e == *x)))
            .cloned()
            .collect()
    };
    // Sources first; a small project cut from the front of the Linux tree holds only
    // documentation, whose text files serve as well.
    let mut all = with(&["c", "h"]);
    if all.len() < n {
        all = with(&["c", "h", "rst", "txt"]);
    }
    let step = (all.len() / n).max(1);
    all.into_iter().step_by(step).take(n).collect()
}

fn edit_files(root: &Path, files: &[PathBuf]) {
    for f in files {
        let p = root.join(f);
        let mut data = fs::read(&p).expect("read file to edit");
        data.extend_from_slice(b"/* edited by the delegation */\n");
        fs::write(&p, data).expect("edit file");
    }
}

fn edit_script(files: &[PathBuf], work: &Path) -> PathBuf {
    let list = work.join("edit-list.txt");
    let s: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
    fs::write(&list, s).expect("write list");
    let script = work.join("edit.sh");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\nwhile IFS= read -r f; do printf '/* edited */\\n' >> \"$f\"; done < {}\n",
            list.display()
        ),
    )
    .expect("write script");
    script
}

fn reference_create(tree: &Path, ws: &Path) -> (f64, f64) {
    let base = ws.join("base");
    let d = ws.join("d-1");
    fs::create_dir_all(&base).expect("mkdir");
    settle();
    let t1 = sh(
        &format!(
            "git ls-files -z --cached --others --exclude-standard | xargs -0 cp -P --preserve=mode,timestamps --parents -t {}",
            base.display()
        ),
        tree,
    );
    settle();
    let t2 = sh(&format!("cp -a {} {}", base.display(), d.display()), ws);
    (t1.as_secs_f64(), t2.as_secs_f64())
}

struct Figures {
    ref_first: Vec<f64>,
    ours_first: Vec<f64>,
    ref_diff: Vec<f64>,
    ours_finalize: Vec<f64>,
    ref_cp: Vec<f64>,
    ours_chain: Vec<f64>,
    ref_run: Vec<f64>,
    ours_run: Vec<f64>,
    /// Each round's reference directory, with the time of its steps before `rm -rf`.
    ref_parts: Vec<(PathBuf, f64)>,
    /// patchbox session roots kept until the end.
    kept: Vec<PathBuf>,
}

/// `label` names the round directories too: no spaces (the reference's steps run in a shell).
fn bench_tree(tree: &Path, work: &Path, rounds: usize, label: &str) -> Figures {
    let files = edit_list(tree, 100);
    let script = edit_script(&files, work);
    let mut f = Figures {
        ref_first: vec![],
        ours_first: vec![],
        ref_diff: vec![],
        ours_finalize: vec![],
        ref_cp: vec![],
        ours_chain: vec![],
        ref_run: vec![],
        ours_run: vec![],
        ref_parts: vec![],
        kept: vec![],
    };
    // No tree is deleted between timed steps: on an ext4 without a journal (this VM's root
    // filesystem) creating files within minutes of a mass deletion is several times slower
    // (the inode allocator skips every recently deleted inode), so whichever step came after
    // a deletion paid for it. Every round works in its own directories; `delete_all` removes
    // them (timing the reference's `rm -rf`) after every step that creates files.
    for round in 0..rounds {
        eprintln!("[{label}] round {}/{rounds}", round + 1);
        // Reference steps.
        let ws = work.join(format!("ref-{label}-{round}"));
        let _ = fs::remove_dir_all(&ws);
        fs::create_dir_all(&ws).expect("mkdir");
        let (t_sel_copy, t_cp) = reference_create(tree, &ws);
        f.ref_first.push(t_sel_copy + t_cp);
        f.ref_cp.push(t_cp);
        let t_edit = sh(&format!("sh {}", script.display()), &ws.join("d-1"));
        settle();
        let t = sh("git diff --no-index --binary base d-1 > /dev/null", &ws);
        f.ref_diff.push(t.as_secs_f64());
        f.ref_parts.push((
            ws,
            t_sel_copy + t_cp + t_edit.as_secs_f64() + t.as_secs_f64(),
        ));

        // patchbox, as a library.
        let root = work.join(format!("pbroot-{label}-{round}"));
        let _ = fs::remove_dir_all(&root);
        let mgr = SandboxManager::with_options(
            tree,
            Options {
                root: Some(root.clone()),
                isolation: patchbox::Isolation::Copy,
                ..Options::default()
            },
        )
        .expect("manager");
        settle();
        let t = Instant::now();
        let sb = mgr.create_sandbox("d1", None).expect("create");
        f.ours_first.push(t.elapsed().as_secs_f64());
        edit_files(&sb.path, &files);
        settle();
        let t = Instant::now();
        let res = mgr.finalize_sandbox(&sb).expect("finalize");
        f.ours_finalize.push(t.elapsed().as_secs_f64());
        assert_eq!(
            res.files_touched.len(),
            files.len(),
            "finalize found the edits"
        );
        settle();
        let t = Instant::now();
        let _sb2 = mgr.create_sandbox("d2", Some(&sb)).expect("chain");
        f.ours_chain.push(t.elapsed().as_secs_f64());
        mgr.keep();
        f.kept.push(root);
    }

    f
}

/// Runs `patchbox run --project tree --root root -- sh script` (the `patchbox` binary built
/// beside this example), its patch captured, its stderr dropped.
fn patchbox_run(tree: &Path, root: &Path, script: &Path) -> std::process::Output {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("patchbox"))
        .expect("target dir");
    // The library's default isolation (`auto`), or what PATCHBOX_ISOLATION says (inherited).
    Command::new(bin)
        .args(["run", "--project"])
        .arg(tree)
        .arg("--root")
        .arg(root)
        .args(["--", "sh"])
        .arg(script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .expect("patchbox run")
}

/// `patchbox run` on `tree`, `rounds` times. `run` deletes its sandbox as part of the job (in
/// a detached reaper); the next round waits for it, and so starts after a deletion, as a
/// user's next run would.
fn bench_runs(tree: &Path, work: &Path, rounds: usize, f: &mut Figures) {
    let script = edit_script(&edit_list(tree, 100), work);
    for round in 0..rounds {
        eprintln!("[run] round {}/{rounds}", round + 1);
        let root = work.join("runroot");
        settle();
        let t = Instant::now();
        let out = patchbox_run(tree, &root, &script);
        f.ours_run.push(t.elapsed().as_secs_f64());
        assert!(out.status.success(), "patchbox run failed");
        // Let the reaper finish before the next timed step, so that step does not share the
        // machine with it.
        wait_until_empty(&root);
        assert!(!out.stdout.is_empty(), "patchbox run printed a patch");
        if round + 1 < rounds && journal_less_ext4(work) {
            // The reference's steps never follow a deletion (see `bench_tree`); this run's
            // must not either.
            eprintln!("[run] journal-less ext4: waiting 6 min for deleted inodes to age");
            std::thread::sleep(Duration::from_secs(370));
        }
    }
}

/// The one-shot `patchbox run` row against what worktree-based peers do for one delegation:
/// `git worktree add --detach`, the tool in it, `git add -A -N . && git diff --binary`,
/// `git worktree remove --force`. Both run the same edit script (100 appended lines) on
/// `tree`, alternating, `rounds` times; each waits for the other's deletions to end (the
/// reaper of `run`) before it starts. Returns (patchbox, peers) wall and CPU seconds (CPU:
/// user + system of the waited-for processes; the detached reaper of `run` is not counted,
/// it runs after the command has returned).
fn bench_run_peers(tree: &Path, work: &Path, rounds: usize) -> PairFigures {
    let script = edit_script(&edit_list(tree, 100), work);
    let mut f = PairFigures::default();
    let root = work.join("runroot");
    let wt = work.join("peer-wt");
    // What an interrupted earlier run may have left.
    let _ = fs::remove_dir_all(&wt);
    sh("git worktree prune", tree);
    for r in 0..rounds {
        settle();
        let c0 = cpu_secs(libc::RUSAGE_CHILDREN);
        let t = Instant::now();
        let out = patchbox_run(tree, &root, &script);
        f.ours.push(t.elapsed().as_secs_f64());
        f.ours_cpu.push(cpu_secs(libc::RUSAGE_CHILDREN) - c0);
        assert!(out.status.success(), "patchbox run failed");
        assert!(!out.stdout.is_empty(), "patchbox run printed a patch");
        wait_until_empty(&root);
        settle();
        let c0 = cpu_secs(libc::RUSAGE_CHILDREN);
        let t = sh(
            &format!(
                "git worktree add -q --detach {wt} HEAD && (cd {wt} && sh {script} && git add -A -N . && git diff --binary > /dev/null) && git worktree remove --force {wt}",
                wt = wt.display(),
                script = script.display()
            ),
            tree,
        );
        f.git.push(t.as_secs_f64());
        f.git_cpu.push(cpu_secs(libc::RUSAGE_CHILDREN) - c0);
        // Not on a journal-less ext4: there this step would follow the peer's deletion,
        // whose freed inodes slow every creation for minutes (see `journal_less_ext4`).
        if !journal_less_ext4(work) {
            settle();
            let t = sh(
                &format!("git worktree add -q --detach {} HEAD", wt.display()),
                tree,
            );
            f.checkout.push(t.as_secs_f64());
            sh(
                &format!("git worktree remove --force {}", wt.display()),
                tree,
            );
        }
        eprintln!(
            "[run] round {}/{rounds}: patchbox run {:.3} s (cpu {:.3}), worktree peer {:.3} s (cpu {:.3}), git worktree add alone {}",
            r + 1,
            f.ours[r],
            f.ours_cpu[r],
            f.git[r],
            f.git_cpu[r],
            f.checkout
                .get(r)
                .map_or("not measured".to_string(), |t| format!("{t:.3} s"))
        );
    }
    f
}

/// Whether `path` is on an ext4 filesystem without a journal, where for 60 s after a
/// deletion (6 min while the inode's table block is dirty) the inode allocator skips each
/// deleted inode, making file creation several times slower. A journaled ext4 has an entry
/// in /proc/fs/jbd2.
fn journal_less_ext4(path: &Path) -> bool {
    let Ok(canon) = fs::canonicalize(path) else {
        return false;
    };
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    // The longest mount point containing `path`: (mount point, fs type, device).
    let mut best: Option<(PathBuf, String, String)> = None;
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(sep) = f.iter().position(|&x| x == "-") else {
            continue;
        };
        let (Some(mp), Some(fstype), Some(dev)) = (f.get(4), f.get(sep + 1), f.get(sep + 2)) else {
            continue;
        };
        let mp = PathBuf::from(mp);
        if canon.starts_with(&mp)
            && best
                .as_ref()
                .is_none_or(|b| mp.as_os_str().len() >= b.0.as_os_str().len())
        {
            best = Some((mp, fstype.to_string(), dev.to_string()));
        }
    }
    let Some((_, fstype, dev)) = best else {
        return false;
    };
    let name = dev.rsplit('/').next().unwrap_or_default();
    fstype == "ext4" && !Path::new(&format!("/proc/fs/jbd2/{name}-8")).exists()
}

/// Deletes what `bench_tree` kept; the reference's last step, `rm -rf`, is timed here.
fn delete_all(f: &mut Figures) {
    for (ws, t_before) in std::mem::take(&mut f.ref_parts) {
        settle();
        let t_rm = sh("rm -rf base d-1", &ws);
        f.ref_run.push(t_before + t_rm.as_secs_f64());
        let _ = fs::remove_dir_all(&ws);
    }
    for root in std::mem::take(&mut f.kept) {
        let _ = fs::remove_dir_all(&root);
    }
}

fn peak_rss_kb(tree: &Path, work: &Path) -> Option<i64> {
    // A child process does one first create + 100 edits + finalize and prints its own peak
    // resident size (VmHWM): getrusage(RUSAGE_CHILDREN) would also count the reference's
    // git processes run earlier.
    child_peak_rss_kb("--rss-child", tree, work)
}

/// Runs this program with `flag tree work` and reads the peak RSS (kB) it prints.
fn child_peak_rss_kb(flag: &str, tree: &Path, work: &Path) -> Option<i64> {
    let exe = std::env::current_exe().ok()?;
    let out = Command::new(exe)
        .arg(flag)
        .arg(tree)
        .arg(work)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn rss_child(tree: &Path, work: &Path) {
    let files = edit_list(tree, 100);
    let root = work.join("rssroot");
    let _ = fs::remove_dir_all(&root);
    let mgr = SandboxManager::with_options(
        tree,
        Options {
            root: Some(root),
            isolation: patchbox::Isolation::Copy,
            ..Options::default()
        },
    )
    .expect("manager");
    let sb = mgr.create_sandbox("m", None).expect("create");
    edit_files(&sb.path, &files);
    let r = mgr.finalize_sandbox(&sb).expect("finalize");
    assert_eq!(r.files_touched.len(), files.len());
    println!("{}", vm_hwm_kb());
}

/// This process's peak resident size (VmHWM), kB.
fn vm_hwm_kb() -> i64 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .unwrap_or(0)
}

/// Copy-on-write: the small project on a loop-mounted XFS image with reflink. Returns
/// (first create, plain copy, creating the files empty) medians, or why it was skipped.
fn bench_xfs(small: &Path, work: &Path, rounds: usize) -> Result<(f64, f64, f64), String> {
    if !quiet_ok(Command::new("mkfs.xfs").arg("-V")) {
        return Err("mkfs.xfs not installed (apt-get install xfsprogs)".into());
    }
    let mnt = work.join("xfs-mnt");
    let proj = image_with_project(
        work,
        "xfs",
        "8G",
        &["mkfs.xfs", "-q", "-m", "reflink=1"],
        small,
    )?;
    let files = ls_files(&proj);
    let (mut ours, mut plain, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let dst = mnt.join(format!("floor-{round}"));
        settle();
        floor.push(create_empty_tree(&dst, &files));
        let dst = mnt.join("plain");
        let _ = fs::remove_dir_all(&dst);
        settle();
        plain.push(
            sh(
                &format!("cp -a --reflink=never {} {}", proj.display(), dst.display()),
                &mnt,
            )
            .as_secs_f64(),
        );
        let _ = fs::remove_dir_all(&dst);
        let root = mnt.join("pbroot");
        let mgr = SandboxManager::with_options(
            &proj,
            Options {
                root: Some(root),
                isolation: patchbox::Isolation::Copy,
                ..Options::default()
            },
        )
        .map_err(|e| e.to_string())?;
        settle();
        let t = Instant::now();
        mgr.create_sandbox("x", None).map_err(|e| e.to_string())?;
        ours.push(t.elapsed().as_secs_f64());
    }
    let _ = Command::new("umount").arg(&mnt).status();
    let _ = fs::remove_file(work.join("xfs.img"));
    Ok((median(ours), median(plain), median(floor)))
}

/// The least any copy must do: the directories, then every file created empty (no data, no
/// timestamps, no stat), on as many threads as patchbox copies with. Returns the seconds taken.
fn create_empty_tree(dst: &Path, files: &[PathBuf]) -> f64 {
    let t = Instant::now();
    let mut last: Option<&Path> = None;
    for f in files {
        let parent = f.parent().unwrap_or(Path::new(""));
        if last != Some(parent) {
            fs::create_dir_all(dst.join(parent)).expect("mkdir");
            last = Some(parent);
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get() * 2);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(64, std::sync::atomic::Ordering::Relaxed);
                if i >= files.len() {
                    return;
                }
                for f in &files[i..(i + 64).min(files.len())] {
                    fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(dst.join(f))
                        .expect("create empty file");
                }
            });
        }
    });
    t.elapsed().as_secs_f64()
}

/// CPU time (user + system, seconds) of this process (`RUSAGE_SELF`, every thread) or of its
/// waited-for children (`RUSAGE_CHILDREN`).
fn cpu_secs(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A row of patchbox against a peer (`git apply`, the worktree peers): wall and CPU seconds
/// per round, each side.
#[derive(Default)]
struct PairFigures {
    ours: Vec<f64>,
    git: Vec<f64>,
    ours_cpu: Vec<f64>,
    git_cpu: Vec<f64>,
    /// `git apply` followed by one `syncfs` of the filesystem (`sync -f`): the least a
    /// durable apply must wait for, in the same run (empty where not measured).
    git_synced: Vec<f64>,
    /// `git worktree add` alone (its removal untimed): writing the tree's files once, the
    /// least a project's first session costs, since it must write a stable snapshot (empty
    /// where not measured).
    checkout: Vec<f64>,
}

/// Applying a 100-file patch to the tree: patchbox's apply (with its undo record, as the CLI
/// keeps one) beside `git apply`, alternating, each reverted after timing (patchbox by its
/// undo record, git by `git apply -R`). CPU time is taken alongside (this process for
/// patchbox, the `sh` + `git` children for git), so the comparison also holds on a loaded
/// machine.
fn bench_apply(tree: &Path, work: &Path, rounds: usize) -> PairFigures {
    let files = edit_list(tree, 100);
    let root = work.join("applyroot");
    let _ = fs::remove_dir_all(&root);
    let patch = {
        let mgr = SandboxManager::with_options(
            tree,
            Options {
                root: Some(root.clone()),
                isolation: patchbox::Isolation::Copy,
                ..Options::default()
            },
        )
        .expect("manager");
        let sb = mgr.create_sandbox("p", None).expect("create");
        edit_files(&sb.path, &files);
        mgr.finalize_sandbox(&sb).expect("finalize").patch
    };
    let pf = work.join("apply-100.patch");
    fs::write(&pf, &patch).expect("write patch");
    let mut f = PairFigures::default();
    // An apply takes a tenth of a second: three times the rounds, for a steadier median.
    let rounds = rounds * 3;
    for r in 0..rounds {
        let undo = work.join("apply-undo");
        let _ = fs::remove_dir_all(&undo);
        settle();
        let (c0, t) = (cpu_secs(libc::RUSAGE_SELF), Instant::now());
        let rep = patchbox::apply::apply_patch(
            tree,
            &patch,
            &patchbox::apply::ApplyOptions {
                undo_dir: Some(undo.clone()),
                ..Default::default()
            },
        )
        .expect("apply");
        f.ours.push(t.elapsed().as_secs_f64());
        f.ours_cpu.push(cpu_secs(libc::RUSAGE_SELF) - c0);
        assert!(rep.is_ok() && rep.wrote(), "{rep}");
        patchbox::apply::undo_apply(tree, &undo, false).expect("undo");
        settle();
        let c0 = cpu_secs(libc::RUSAGE_CHILDREN);
        f.git
            .push(sh(&format!("git apply {}", pf.display()), tree).as_secs_f64());
        f.git_cpu.push(cpu_secs(libc::RUSAGE_CHILDREN) - c0);
        sh(&format!("git apply -R {}", pf.display()), tree);
        settle();
        f.git_synced
            .push(sh(&format!("git apply {} && sync -f .", pf.display()), tree).as_secs_f64());
        sh(&format!("git apply -R {}", pf.display()), tree);
        eprintln!(
            "[apply] round {}/{rounds}: patchbox {:.3} s (cpu {:.3}), git apply {:.3} s (cpu {:.3}), git apply + syncfs {:.3} s",
            r + 1,
            f.ours[r],
            f.ours_cpu[r],
            f.git[r],
            f.git_cpu[r],
            f.git_synced[r]
        );
    }
    f
}

/// Prints the apply row: wall medians and ratio, CPU medians and ratio.
fn print_apply(f: &PairFigures) {
    let (o, g) = (median(f.ours.clone()), median(f.git.clone()));
    let (oc, gc) = (median(f.ours_cpu.clone()), median(f.git_cpu.clone()));
    println!(
        "| large tree: apply a 100-file patch, undo record included (vs git apply; median of 3× the rounds; wall, then CPU user+sys) | {o:.3} s (cpu {oc:.3} s) | {g:.3} s (cpu {gc:.3} s) | {:.2}× (cpu {:.2}×) | ≤ 1× |",
        o / g,
        oc / gc
    );
    let gs = median(f.git_synced.clone());
    println!(
        "| the floor of a durable apply: `git apply` then one `syncfs` (`sync -f`), same rounds | {o:.3} s | {gs:.3} s | {:.2}× (floor: {:.2}× git apply) | — |",
        o / gs,
        gs / g
    );
}

/// With `--ext4-image`: a journaled ext4 (plain `mkfs.ext4`, as most Linux machines have) on a
/// loop-mounted sparse image under `work`, holding a copy of the project (its index refreshed,
/// so the copy is as clean as the original). Returns (project, work dir) on it.
fn ext4_image_work(tree: &Path, work: &Path) -> Result<(PathBuf, PathBuf), String> {
    let proj = image_with_project(work, "ext4", "48G", &["mkfs.ext4", "-q", "-F"], tree)?;
    let mnt = work.join("ext4-mnt");
    let w = mnt.join("work");
    fs::create_dir_all(&w).map_err(|e| e.to_string())?;
    Ok((proj, w))
}

/// Free room the host filesystem should have for an image run (a 3-round `--isolation` run
/// on the Linux tree wrote about 23 GB into its image).
const IMAGE_ROOM_GB: f64 = 25.0;

/// Makes a sparse image `work/NAME.img` of `size` with `mkfs` (the image's path is appended),
/// loop-mounts it at `work/NAME-mnt` and copies `project` to `project/` in it. A copied
/// repository's index holds the stat data of the original files; it is refreshed as any git
/// command would, so the copy is as clean a git project as the original.
fn image_with_project(
    work: &Path,
    name: &str,
    size: &str,
    mkfs: &[&str],
    project: &Path,
) -> Result<PathBuf, String> {
    let img = work.join(format!("{name}.img"));
    let mnt = work.join(format!("{name}-mnt"));
    let _ = Command::new("umount").arg(&mnt).status();
    let _ = fs::remove_file(&img);
    // The image is sparse: what is written into it takes room on the host filesystem, and a
    // full host fails the image's writes with EIO in the middle of a row.
    if let Ok(st) = rustix::fs::statvfs(work) {
        let free_gb = (st.f_bavail as f64 * st.f_frsize as f64) / 1e9;
        if free_gb < IMAGE_ROOM_GB {
            eprintln!(
                "warning: {free_gb:.1} GB free under {}; a 3-round --isolation run on the Linux \
                 tree writes about {IMAGE_ROOM_GB} GB into the {name} image",
                work.display()
            );
        }
    }
    fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
    if !quiet_ok(Command::new("truncate").arg("-s").arg(size).arg(&img))
        || !quiet_ok(Command::new(mkfs[0]).args(&mkfs[1..]).arg(&img))
        || !quiet_ok(
            Command::new("mount")
                .args(["-o", "loop"])
                .arg(&img)
                .arg(&mnt),
        )
    {
        let _ = fs::remove_file(&img);
        return Err(format!(
            "cannot make or loop-mount a {name} image (needs root and loop devices)"
        ));
    }
    let proj = mnt.join("project");
    sh(
        &format!("cp -a {} {}", project.display(), proj.display()),
        work,
    );
    sh("git update-index -q --refresh", &proj);
    Ok(proj)
}

/// Unmounts and deletes the ext4 image `ext4_image_work` made under `work`.
fn unmount_image(work: &Path) {
    let _ = Command::new("umount").arg(work.join("ext4-mnt")).status();
    let _ = fs::remove_file(work.join("ext4.img"));
}

fn make_small(tree: &Path, work: &Path, n: usize) -> PathBuf {
    let small = work.join(format!("small-{n}"));
    if small.join(".git").exists() {
        return small;
    }
    let _ = fs::remove_dir_all(&small);
    fs::create_dir_all(&small).expect("mkdir");
    sh(
        &format!(
            "git ls-files -z | head -z -n {n} | xargs -0 cp -P --preserve=mode,timestamps --parents -t {}",
            small.display()
        ),
        tree,
    );
    // Packed here, in the foreground: the commit of 20,000 loose objects would start a
    // detached `git gc --auto`, which then packs and prunes them while the plan rows copy the
    // project (`cp` reported hundreds of vanished objects).
    sh(
        "git init -q && git add -A -f && git -c user.name=b -c user.email=b@b -c gc.auto=0 \
         commit -qm small && git gc -q",
        &small,
    );
    small
}

/// The patch creating `f` at a path of `depth` components (`d/…/d/f`).
fn deep_creation_patch(depth: usize) -> Vec<u8> {
    let mut path = "d/".repeat(depth.saturating_sub(1));
    path.push('f');
    format!(
        "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+deep\n"
    )
    .into_bytes()
}

/// The floor for creating a file `depth` components deep: a chain of `mkdirat` + `openat`
/// and one file, with nothing checked. Returns the seconds taken.
fn mkdirat_chain(dir: &Path, depth: usize) -> f64 {
    use std::os::unix::ffi::OsStrExt;
    let t = Instant::now();
    let root = std::ffi::CString::new(dir.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: plain syscalls on NUL-terminated names; every descriptor is closed once.
    unsafe {
        let mut fd = libc::open(root.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        assert!(fd >= 0, "open {}", dir.display());
        for _ in 1..depth {
            assert_eq!(libc::mkdirat(fd, c"d".as_ptr(), 0o777), 0, "mkdirat");
            let next = libc::openat(fd, c"d".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            assert!(next >= 0, "openat");
            libc::close(fd);
            fd = next;
        }
        let f = libc::openat(fd, c"f".as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
        assert!(f >= 0, "create");
        assert_eq!(libc::write(f, b"deep\n".as_ptr().cast(), 5), 5);
        libc::close(f);
        libc::syncfs(fd);
        libc::close(fd);
    }
    t.elapsed().as_secs_f64()
}

/// `--depth-only`: time `apply_patch` creating one file at each depth.
fn bench_depth(work: &Path, depths: &[usize]) {
    use patchbox::apply::{apply_patch, ApplyOptions, Outcome};
    fs::create_dir_all(work).expect("work dir");
    println!(
        "| path depth (components) | patch size | plan only (check mode) | per component | apply_patch | per component | floor: mkdirat chain | apply with undo record | undo | per component | floor: rm -rf |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &depth in depths {
        let project = work.join(format!("depth-{depth}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&project);
        fs::create_dir_all(&project).expect("project dir");
        let patch = deep_creation_patch(depth);
        let t = Instant::now();
        let checked = apply_patch(
            &project,
            &patch,
            &ApplyOptions {
                check: true,
                ..ApplyOptions::default()
            },
        );
        let plan = t.elapsed().as_secs_f64();
        if let Err(e) = checked {
            println!("depth {depth}: error: {e}");
        }
        let t = Instant::now();
        let report = apply_patch(&project, &patch, &ApplyOptions::default());
        let d = t.elapsed().as_secs_f64();
        match report {
            Ok(r) if r.outcome == Outcome::Applied => {}
            Ok(r) => println!("depth {depth}: not applied:\n{r}"),
            Err(e) => println!("depth {depth}: error: {e}"),
        }
        let floor_dir = work.join(format!("floor-{depth}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&floor_dir);
        fs::create_dir_all(&floor_dir).expect("floor dir");
        let floor = mkdirat_chain(&floor_dir, depth);
        // GNU rm walks with descriptors too: a tree deeper than PATH_MAX goes.
        let _ = Command::new("rm").arg("-rf").arg(&project).status();
        // The same file with an undo record, then undone: the undo removes the chain
        // bottom-up, each directory checked on the way.
        fs::create_dir_all(&project).expect("project dir");
        let store = patchbox::apply::store::UndoStore::new(work.join(format!("undo-{depth}")));
        let t = Instant::now();
        if let Err(e) = store.apply(&project, &patch, &ApplyOptions::default()) {
            println!("depth {depth}: error: {e}");
        }
        let recorded = t.elapsed().as_secs_f64();
        let t = Instant::now();
        if let Err(e) = store.undo_last(&project, false) {
            println!("depth {depth}: undo error: {e}");
        }
        let undo = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let _ = Command::new("rm").arg("-rf").arg(&floor_dir).status();
        let rm_floor = t.elapsed().as_secs_f64();
        println!(
            "| {depth} | {:.1} KB | {:.4} s | {:.2} µs | {:.4} s | {:.2} µs | {:.4} s | {:.4} s | {:.4} s | {:.2} µs | {:.4} s |",
            patch.len() as f64 / 1024.0,
            plan,
            plan * 1e6 / depth as f64,
            d,
            d * 1e6 / depth as f64,
            floor,
            recorded,
            undo,
            undo * 1e6 / depth as f64,
            rm_floor,
        );
        let _ = Command::new("rm").arg("-rf").arg(&project).status();
        let _ = fs::remove_dir_all(work.join(format!("undo-{depth}")));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--depth-only") {
        let depths: Vec<usize> = args
            .iter()
            .position(|a| a == "--depths")
            .and_then(|i| args.get(i + 1))
            .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_else(|| vec![10, 1000, 4000]);
        let work = args
            .iter()
            .position(|a| a == "--work")
            .and_then(|i| args.get(i + 1))
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("patchbox-bench"));
        bench_depth(&work, &depths);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--rss-isolation-child") {
        isolation::rss_child(Path::new(&args[2]), Path::new(&args[3]));
        return;
    }
    if args.get(1).map(String::as_str) == Some("--rss-child") {
        rss_child(Path::new(&args[2]), Path::new(&args[3]));
        return;
    }
    let mut tree = None;
    let mut rounds = 3;
    let mut work = std::env::temp_dir().join("patchbox-bench");
    let mut small_n = 20_000;
    let mut skip_large = false;
    let mut ext4_image = false;
    let mut plan_only = false;
    let mut commit_cow = false;
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--tree" => tree = args.get(i + 1).map(PathBuf::from),
            "--rounds" => rounds = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(3),
            "--work" => work = args.get(i + 1).map(PathBuf::from).unwrap_or(work),
            "--skip-large" => {
                skip_large = true;
                i -= 1;
            }
            "--ext4-image" => {
                ext4_image = true;
                i -= 1;
            }
            "--plan" => {
                plan_only = true;
                i -= 1;
            }
            "--commit-cow" => {
                commit_cow = true;
                i -= 1;
            }
            "--plan-commit" | "--plan-diff" | "--apply-only" | "--run-only" | "--isolation"
            | "--session20" => i -= 1,
            "--small" => {
                small_n = args
                    .get(i + 1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(20_000)
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    let mut tree = tree.expect("--tree DIR (a git project) is required");
    fs::create_dir_all(&work).expect("work dir");
    let xfs_work = work.clone();
    let mounted = if ext4_image {
        match ext4_image_work(&tree, &work) {
            Ok((t, w)) => {
                println!(
                    "on a journaled ext4 image (default mkfs.ext4), loop-mounted at {}",
                    w.display()
                );
                tree = t;
                work = w;
                true
            }
            Err(why) => {
                println!("ext4 image not used: {why}");
                false
            }
        }
    } else {
        false
    };
    if journal_less_ext4(&work) {
        println!(
            "note: {} is on ext4 without a journal: creating files is slower for minutes after a \
             deletion made before this benchmark; --ext4-image measures on a journaled ext4",
            work.display()
        );
    }
    if args.iter().any(|a| a == "--apply-only") {
        let f = bench_apply(&tree, &work, rounds);
        print_apply(&f);
        if mounted {
            unmount_image(&xfs_work);
        }
        return;
    }
    if args.iter().any(|a| a == "--isolation") {
        let session20 = args.iter().any(|a| a == "--session20");
        isolation::run(&tree, &work, rounds, session20);
        if mounted {
            unmount_image(&xfs_work);
        }
        return;
    }
    let small = make_small(&tree, &work, small_n);
    if args.iter().any(|a| a == "--run-only") {
        let f = bench_run_peers(&small, &work, rounds);
        // With overlays, round 1 also writes the project's shared lower layer (once per
        // project); the later rounds stack it. Both are shown; the medians are the later
        // rounds' (with one round, that round's).
        let later = |v: &Vec<f64>| {
            median(if v.len() > 1 {
                v[1..].to_vec()
            } else {
                v.clone()
            })
        };
        println!(
            "| one-shot `patchbox run`, round 1 (a first session of the project) | {:.3} s (cpu {:.3} s) | {:.3} s (cpu {:.3} s) | {:.2}× (cpu {:.2}×) | — |",
            f.ours[0],
            f.ours_cpu[0],
            f.git[0],
            f.git_cpu[0],
            f.ours[0] / f.git[0],
            f.ours_cpu[0] / f.git_cpu[0]
        );
        if let Some(first) = f.checkout.first() {
            let ck = median(f.checkout.clone());
            println!(
                "| the floor of a first session: writing the files once (`git worktree add` alone, median of the rounds) | — | {ck:.3} s | {:.2}× of the peer (round 1: {:.2}×) | — |",
                ck / median(f.git.clone()),
                first / f.git[0]
            );
        }
        let (o, g) = (later(&f.ours), later(&f.git));
        let (oc, gc) = (later(&f.ours_cpu), later(&f.git_cpu));
        println!(
            "| one-shot `patchbox run`, 100 edits, {small_n}-file git project, rounds 2.. (vs git worktree add + the tool + git add -N + git diff --binary + git worktree remove; wall, then CPU user+sys) | {o:.3} s (cpu {oc:.3} s) | {g:.3} s (cpu {gc:.3} s) | {:.2}× (cpu {:.2}×) | ≤ 0.25× |",
            o / g,
            oc / gc
        );
        if mounted {
            unmount_image(&xfs_work);
        }
        return;
    }
    if args.iter().any(|a| a == "--plan-commit") {
        let pw = work.join("plan-commit");
        let _ = fs::remove_dir_all(&pw);
        fs::create_dir_all(&pw).expect("work dir");
        let mgr = patchbox::plan::PlanManager::open(pw.join("root")).expect("open");
        let mut f = PlanFigures::default();
        let strategy = if commit_cow {
            patchbox::plan::Strategy::CopyOnWrite
        } else {
            patchbox::plan::Strategy::Overlay
        };
        println!(
            "commit_all of 4 {strategy:?} sandboxes over {}",
            small.display()
        );
        let label = if commit_cow {
            "copy_on_write"
        } else {
            "overlay"
        };
        bench_plan_commit(&mgr, &small, &pw, rounds, strategy, &mut f);
        let (ca, ga) = (median(f.commit_all.clone()), median(f.git_apply.clone()));
        let (cc, gc) = (
            median(f.commit_all_cpu.clone()),
            median(f.git_apply_cpu.clone()),
        );
        println!("| commit_all, 4 {label} sandboxes × 100 edits, {small_n}-file projects (vs 4× git apply; wall, then CPU user+sys) | {ca:.3} s (cpu {cc:.3} s) | {ga:.3} s (cpu {gc:.3} s) | {:.2}× (cpu {:.2}×) | — |", ca / ga, cc / gc);
        let gs = median(f.git_apply_synced.clone());
        println!("| against the floor of a durable commit: the 4 `git apply` then one `syncfs` | {ca:.3} s | {gs:.3} s | {:.2}× (floor: {:.2}× git apply) | ≤ 1.5× |", ca / gs, gs / ga);
        drop(mgr);
        let _ = fs::remove_dir_all(&pw);
        if mounted {
            unmount_image(&xfs_work);
        }
        return;
    }
    if args.iter().any(|a| a == "--plan-diff") {
        let f = bench_plan(&tree, &small, &work, rounds, true);
        let (od, fd) = (median(f.ov_diff.clone()), median(f.full_diff.clone()));
        println!("| overlay diff of 100 edits vs diff -rN of the snapshot and an edited copy (medians of {rounds}) | {od:.4} s | {fd:.3} s | {:.3}× | ≤ 0.05× |", od / fd);
        return;
    }
    if plan_only {
        let f = bench_plan(&tree, &small, &work, rounds, false);
        print_plan(&f, &tree, small_n);
        return;
    }

    // Every step that creates files runs before any tree is deleted (see `bench_tree`).
    let mut l = if skip_large {
        bench_tree(&small, &work, 1, "small-again")
    } else {
        bench_tree(&tree, &work, rounds, "large")
    };
    let mut s = bench_tree(&small, &work, rounds, "small");
    bench_runs(&small, &work, rounds, &mut s);
    let xfs = bench_xfs(&small, &xfs_work, rounds);
    let apply_fig = (!skip_large).then(|| bench_apply(&tree, &work, rounds));
    let rss = if skip_large {
        None
    } else {
        peak_rss_kb(&tree, &work)
    };
    delete_all(&mut l);
    delete_all(&mut s);
    if mounted {
        unmount_image(&xfs_work);
    }

    let row = |name: &str, ours: &[f64], theirs: &[f64], target: &str| {
        let (o, t) = (median(ours.to_vec()), median(theirs.to_vec()));
        println!(
            "| {name} | {:.3} s | {:.3} s | {:.2}× | {target} |",
            o,
            t,
            o / t
        );
    };
    println!("| step | patchbox | reference | ratio | target |");
    println!("|---|---|---|---|---|");
    row(
        &format!("`patchbox run`, 100 edits, {small_n}-file git project (vs ls-files+copy, cp -a, git diff, rm -rf)"),
        &s.ours_run,
        &s.ref_run,
        "≤ 0.35×",
    );
    row(
        "large tree: first create_sandbox (vs ls-files + copy + cp -a)",
        &l.ours_first,
        &l.ref_first,
        "≤ 0.5×",
    );
    row(
        "large tree: finalize, 100 edited files (vs git diff --no-index --binary)",
        &l.ours_finalize,
        &l.ref_diff,
        "≤ 0.1×",
    );
    row(
        "large tree: chained create (vs cp -a)",
        &l.ours_chain,
        &l.ref_cp,
        "≤ 0.6×",
    );
    row(
        "small: first create_sandbox",
        &s.ours_first,
        &s.ref_first,
        "",
    );
    row("small: finalize", &s.ours_finalize, &s.ref_diff, "");
    row("small: chained create", &s.ours_chain, &s.ref_cp, "");
    if let Some(f) = &apply_fig {
        print_apply(f);
    }
    match xfs {
        Ok((o, p, fl)) => {
            println!(
                "| XFS reflink image: first create_sandbox, {small_n}-file git project (vs plain cp -a --reflink=never) | {o:.3} s | {p:.3} s | {:.2}× | ≤ 0.2× |",
                o / p
            );
            println!(
                "| XFS: only creating the directories and {small_n} empty files (vs the same cp -a) | {fl:.3} s | {p:.3} s | {:.2}× | a floor for any copy |",
                fl / p
            );
        }
        Err(why) => println!("\nXFS reflink figure skipped: {why}"),
    }
    if let Some(kb) = rss {
        println!(
            "\npeak RSS, first create + finalize on the large tree: {:.1} MB (target < 100 MB)",
            kb as f64 / 1024.0
        );
    }
    if !skip_large {
        let f = bench_plan(&tree, &small, &work, rounds, false);
        print_plan(&f, &tree, small_n);
    }
    println!(
        "\nmedians of {rounds} rounds; machine: {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
}

// ---- plan sandboxes (`--plan`) -------------------------------------------------------------

/// The plan rows' figures (seconds per round).
#[derive(Default)]
struct PlanFigures {
    prepare: f64,
    lower_files: usize,
    ov_create: Vec<f64>,
    cow_create: Vec<f64>,
    wt_create: Vec<f64>,
    cp_create: Vec<f64>,
    ov_diff: Vec<f64>,
    cow_diff: Vec<f64>,
    git_diff: Vec<f64>,
    full_diff: Vec<f64>,
    commit_all: Vec<f64>,
    git_apply: Vec<f64>,
    /// CPU time (user + system) of the same steps.
    commit_all_cpu: Vec<f64>,
    git_apply_cpu: Vec<f64>,
    /// The four `git apply` runs and one `syncfs` after them: the floor of a durable commit.
    git_apply_synced: Vec<f64>,
    mode: String,
    commit_files: usize,
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed().as_secs_f64())
}

/// The plan-sandbox rows on `tree` (create and diff) and on four copies of `small`
/// (commit_all). Kernel OverlayFS is forced (this needs root).
/// `diff_only`: only the overlay sandbox, the `cp -a` copy and their diffs (`--plan-diff`).
fn bench_plan(
    tree: &Path,
    small: &Path,
    work: &Path,
    rounds: usize,
    diff_only: bool,
) -> PlanFigures {
    use patchbox::plan::{PlanManager, Strategy};
    let pw = work.join("plan");
    let _ = fs::remove_dir_all(&pw);
    fs::create_dir_all(&pw).expect("plan work dir");
    let root = pw.join("root");
    let mgr = PlanManager::open(&root).expect("open plan manager");
    let mut f = PlanFigures::default();

    settle_for(3);
    let (info, prep) = timed(|| mgr.prepare_snapshot(tree).expect("prepare_snapshot"));
    f.prepare = prep;
    f.lower_files = info.files;
    let lower = info.path.clone();
    let edits = edit_list(tree, 100);
    let gitsrc = pw.join("gitsrc");
    sh(
        &format!(
            "git clone -q --shared --no-checkout {} {}",
            tree.display(),
            gitsrc.display()
        ),
        &pw,
    );
    let mut kept = Vec::new();
    for r in 0..rounds {
        eprintln!("plan round {r}: create");
        settle_for(3);
        let (ov, t) = timed(|| {
            mgr.get_or_create_sandbox(&format!("ov{r}"), "tree", tree, Strategy::Overlay)
                .expect("overlay create")
        });
        f.ov_create.push(t);
        let ctx = ov.context().expect("context");
        f.mode = ctx
            .metadata
            .get("overlay.mode")
            .cloned()
            .unwrap_or_default();
        assert!(
            ctx.metadata.contains_key("overlay.lower"),
            "the overlay sandbox did not use the prepared lower"
        );
        let cow = (!diff_only).then(|| {
            settle_for(3);
            let (cow, t) = timed(|| {
                mgr.get_or_create_sandbox(&format!("cow{r}"), "tree", tree, Strategy::CopyOnWrite)
                    .expect("copy_on_write create")
            });
            f.cow_create.push(t);
            cow
        });
        let wt = pw.join(format!("wt{r}"));
        if !diff_only {
            settle_for(3);
            f.wt_create.push(
                sh(
                    &format!("git worktree add -q --detach {} HEAD", wt.display()),
                    &gitsrc,
                )
                .as_secs_f64(),
            );
        }
        settle_for(3);
        let cp = pw.join(format!("cp{r}"));
        f.cp_create
            .push(sh(&format!("cp -a {} {}", lower.display(), cp.display()), &pw).as_secs_f64());

        eprintln!("plan round {r}: diff");
        let ov_root = ov.get_path(Path::new("")).expect("overlay path");
        let mut roots = vec![ov_root, cp.clone()];
        if let Some(cow) = &cow {
            roots.push(cow.get_path(Path::new("")).expect("cow path"));
            roots.push(wt.clone());
        }
        for root in &roots {
            edit_files(root, &edits);
        }
        settle_for(3);
        let (d, t) = timed(|| ov.diff().expect("overlay diff"));
        assert_eq!(d.entries.len(), edits.len(), "overlay diff");
        f.ov_diff.push(t);
        if let Some(cow) = &cow {
            settle_for(3);
            let (d, t) = timed(|| cow.diff().expect("cow diff"));
            assert_eq!(d.entries.len(), edits.len(), "cow diff");
            f.cow_diff.push(t);
            settle_for(3);
            f.git_diff
                .push(sh("git add -A -N . && git diff --binary > /dev/null", &wt).as_secs_f64());
        }
        settle_for(3);
        f.full_diff.push(
            sh(
                &format!(
                    "diff -rN --no-dereference {} {} > /dev/null",
                    lower.display(),
                    cp.display()
                ),
                &pw,
            )
            .as_secs_f64(),
        );
        if diff_only {
            eprintln!("  diff ov {:.4} full {:.3}", f.ov_diff[r], f.full_diff[r]);
        } else {
            eprintln!(
                "  create ov {:.4} cow {:.3} wt {:.3} cp {:.3}; diff ov {:.4} cow {:.3} git {:.3} full {:.3}",
                f.ov_create[r], f.cow_create[r], f.wt_create[r], f.cp_create[r],
                f.ov_diff[r], f.cow_diff[r], f.git_diff[r], f.full_diff[r]
            );
        }
        // Nothing is deleted before the last timed step (see `bench_tree`).
        kept.push((ov, cow));
    }

    if !diff_only {
        bench_plan_commit(&mgr, small, &pw, rounds, Strategy::Overlay, &mut f);
    }
    drop(kept);
    drop(mgr);
    eprintln!("plan: deleting {}", pw.display());
    let _ = fs::remove_dir_all(&pw);
    f
}

/// `commit_all` of four overlay sandboxes over four copies of `small` (each with its prepared
/// lower), 100 edits each, vs `git apply` of the same four patches, alternating per round.
fn bench_plan_commit(
    mgr: &patchbox::plan::PlanManager,
    small: &Path,
    pw: &Path,
    rounds: usize,
    strategy: patchbox::plan::Strategy,
    f: &mut PlanFigures,
) {
    // commit_all: four originals (copies of `small`), each with its prepared lower.
    let origs: Vec<PathBuf> = (0..4).map(|i| pw.join(format!("orig{i}"))).collect();
    for o in &origs {
        sh(&format!("cp -a {} {}", small.display(), o.display()), pw);
        mgr.prepare_snapshot(o).expect("prepare small");
    }
    let small_edits = edit_list(small, 100);
    assert_eq!(
        small_edits.len(),
        100,
        "the small project has too few text files to edit"
    );
    f.commit_files = ls_files(small).len();
    for r in 0..rounds {
        eprintln!("plan round {r}: commit_all");
        let plan = format!("c{r}");
        let mut patches = Vec::new();
        for (i, o) in origs.iter().enumerate() {
            let sb = mgr
                .get_or_create_sandbox(&plan, &format!("r{i}"), o, strategy.clone())
                .expect("create");
            edit_files(&sb.get_path(Path::new("")).expect("path"), &small_edits);
            let p = pw.join(format!("p{i}.patch"));
            fs::write(&p, sb.diff().expect("diff").patch).expect("write patch");
            patches.push(p);
        }
        settle_for(3);
        let c0 = cpu_secs(libc::RUSAGE_SELF);
        let (res, t) = timed(|| mgr.commit_all(&plan).expect("commit_all"));
        f.commit_all_cpu.push(cpu_secs(libc::RUSAGE_SELF) - c0);
        assert!(res.iter().all(|c| c.success) && res.len() == 4);
        f.commit_all.push(t);
        mgr.rollback_all(&plan).expect("undo the commits");
        settle_for(3);
        let mut sum = 0.0;
        let c0 = cpu_secs(libc::RUSAGE_CHILDREN);
        for (o, p) in origs.iter().zip(&patches) {
            sum += sh(&format!("git apply {}", p.display()), o).as_secs_f64();
        }
        f.git_apply_cpu.push(cpu_secs(libc::RUSAGE_CHILDREN) - c0);
        f.git_apply.push(sum);
        // The four originals share one filesystem: one syncfs makes all four durable.
        f.git_apply_synced
            .push(sum + sh("sync -f .", &origs[0]).as_secs_f64());
        eprintln!(
            "  commit_all {:.3} s (cpu {:.3}), git apply {:.3} s (cpu {:.3}), + one syncfs {:.3} s",
            f.commit_all[r], f.commit_all_cpu[r], sum, f.git_apply_cpu[r], f.git_apply_synced[r]
        );
        for (o, p) in origs.iter().zip(&patches) {
            sh(&format!("git apply -R {}", p.display()), o);
        }
    }
}

fn print_plan(f: &PlanFigures, tree: &Path, small_n: usize) {
    let m = |v: &[f64]| median(v.to_vec());
    let (ov, cow, wt, cp) = (
        m(&f.ov_create),
        m(&f.cow_create),
        m(&f.wt_create),
        m(&f.cp_create),
    );
    let (od, cd, gd, fd) = (
        m(&f.ov_diff),
        m(&f.cow_diff),
        m(&f.git_diff),
        m(&f.full_diff),
    );
    let (ca, ga) = (m(&f.commit_all), m(&f.git_apply));
    let (cc, gc) = (m(&f.commit_all_cpu), m(&f.git_apply_cpu));
    println!(
        "\nplan sandboxes on {} ({} files in the prepared lower; overlay mode: {}); prepare_snapshot took {:.3} s (once)\n",
        tree.display(),
        f.lower_files,
        f.mode,
        f.prepare
    );
    println!("| step | overlay | copy_on_write | git worktree | cp -a / diff -r | target |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| create (prepared lower exists) | {:.4} s | {:.3} s ({:.0}×) | {:.3} s ({:.0}×) | {:.3} s ({:.0}×) | overlay ≤ 10 ms |",
        ov, cow, cow / ov, wt, wt / ov, cp, cp / ov
    );
    println!(
        "| diff of 100 edits | {:.4} s | {:.3} s ({:.1}×) | {:.3} s ({:.1}×) | {:.3} s ({:.1}×) | overlay ≤ 0.05× full tree diff: {:.3}× |",
        od, cd, cd / od, gd, gd / od, fd, fd / od, od / fd
    );
    println!(
        "\n| step | patchbox | reference | ratio | target |\n|---|---|---|---|---|\n| commit_all of 4 overlay sandboxes × 100 edits, {small_n}-file projects (vs 4× git apply, summed; wall, then CPU user+sys) | {:.3} s (cpu {:.3} s) | {:.3} s (cpu {:.3} s) | {:.2}× (cpu {:.2}×) | ≤ 1.2× |",
        ca, cc, ga, gc, ca / ga, cc / gc
    );
    println!("\nplan: medians of {} rounds", f.ov_create.len());
}
