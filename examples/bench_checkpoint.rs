//! Benchmark of checkpoints: checkpoint and rollback of a plan sandbox of a large
//! tree with 100 changed files, beside what the peers do, in one run, medians of rounds.
//!
//! ```text
//! cargo run --release --example bench_checkpoint -- --tree DIR [--rounds N] [--work DIR]
//!     [--strategy overlay|copy_on_write]
//! ```
//! On Btrfs, with `--work` on the same filesystem and as root, a `copy_on_write` sandbox
//! learns its changes from the filesystem's change record instead of a walk. Every timed
//! step, the peers' too, starts after an untimed `sync`: the record's look commits the
//! filesystem's transaction, which would otherwise carry the writeback of the step before.
//! `DIR` is a large project (e.g. the Linux tree from `../shared/corpus/linux-tree.sh DIR`).
//! Rows, per strategy (`overlay`, `copy_on_write`):
//! * **checkpoint** of the sandbox after 100 files changed, vs `cp -a` of the sandbox (the
//!   peers that copy the working directory) and vs a shadow repository's `git add -A -f` +
//!   `git commit` (the peers that keep a shadow git repository; its first commit is made
//!   beforehand, untimed, so only the incremental commit is compared);
//! * **rollback** to the previous checkpoint (100 files back), vs the shadow repository's
//!   `git checkout -f HEAD~1 -- . && git clean -fdq` equivalent (`git read-tree -u --reset
//!   HEAD~1`);
//! * **disk** per checkpoint vs the bytes of the changed files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use patchbox::plan::checkpoint::CheckpointManager;
use patchbox::plan::{PlanManager, Sandbox, Strategy};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn sh(cmd: &str, cwd: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("sh runs");
    let d = t.elapsed();
    assert!(
        out.status.success(),
        "{cmd} failed: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

/// The first `n` regular files under `root` (sorted), relative to it.
fn some_files(root: &Path, n: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = fs::read_dir(&d).unwrap().filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let t = e.file_type().unwrap();
            if e.file_name() == ".git" {
                continue;
            }
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path().strip_prefix(root).unwrap().to_path_buf());
                if out.len() == n {
                    return out;
                }
            }
        }
    }
    out
}

/// Appends a line to each file; returns the bytes of the changed files.
fn edit(sb: &Arc<dyn Sandbox>, files: &[PathBuf], round: usize) -> u64 {
    let mut bytes = 0;
    for f in files {
        let p = sb.get_path(f).unwrap();
        let mut data = fs::read(&p).unwrap();
        data.extend_from_slice(format!("/* round {round} */\n").as_bytes());
        bytes += data.len() as u64;
        fs::write(&p, data).unwrap();
    }
    bytes
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let tree = PathBuf::from(arg("--tree").expect("--tree DIR"));
    let rounds: usize = arg("--rounds").and_then(|r| r.parse().ok()).unwrap_or(5);
    let work = PathBuf::from(arg("--work").unwrap_or_else(|| "/work/bench-checkpoint".into()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).unwrap();
    let root = work.join("root");
    let plans = PlanManager::open(&root).unwrap();
    let cm = CheckpointManager::new(&root);
    let files = some_files(&tree, 100);
    let only = arg("--strategy");
    println!("| strategy | step | patchbox | cp -a of the sandbox | shadow git | vs cp -a | vs shadow git | target |");
    println!("|---|---|---|---|---|---|---|---|");
    for strategy in [Strategy::Overlay, Strategy::CopyOnWrite] {
        if only.as_deref().is_some_and(|o| o != strategy.name()) {
            continue;
        }
        let t = Instant::now();
        let sb = plans
            .get_or_create_sandbox("bench", strategy.name(), &tree, strategy.clone())
            .unwrap();
        let made = t.elapsed();
        let sandbox = sb.get_path(Path::new("")).unwrap();
        eprintln!(
            "{strategy}: sandbox made in {made:?} ({:?})",
            sb.context().unwrap().metadata.get("overlay.mode")
        );
        // The shadow repository of the peers: work tree = the sandbox, first commit untimed.
        let shadow = work.join(format!("shadow-{}.git", strategy.name()));
        let g = format!(
            "git --git-dir={} --work-tree={} -c user.name=b -c user.email=b@b -c gc.auto=0",
            shadow.display(),
            sandbox.display()
        );
        sh(&format!("git init -q --bare {}", shadow.display()), &work);
        sh(&format!("{g} add -A -f && {g} commit -q -m base"), &sandbox);
        let (mut ck, mut rb, mut cp, mut sg, mut sgr, mut disk, mut changed) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut last = cm
            .create_checkpoint(&sb, "bench", "pre_execute", BTreeMap::new())
            .unwrap();
        for round in 0..rounds {
            let bytes = edit(&sb, &files, round);
            let before = cm.disk_bytes(sb.sandbox_id());
            sh("sync", &work);
            let t = Instant::now();
            let cp_now = cm
                .create_checkpoint(&sb, "bench", "post_execute", BTreeMap::new())
                .unwrap();
            ck.push(t.elapsed().as_secs_f64());
            disk.push((cm.disk_bytes(sb.sandbox_id()) - before) as f64);
            changed.push(bytes as f64);
            // The peers' checkpoints of the same state.
            let copy = work.join(format!("copy-{round}"));
            sh("sync", &work);
            cp.push(
                sh(
                    &format!("cp -a {} {}", sandbox.display(), copy.display()),
                    &work,
                )
                .as_secs_f64(),
            );
            sh("sync", &work);
            sg.push(
                sh(
                    &format!("{g} add -A -f && {g} commit -q -m r{round}"),
                    &sandbox,
                )
                .as_secs_f64(),
            );
            let _ = fs::remove_dir_all(&copy);
            // Rollback to the checkpoint before the edits, then forward again.
            sh("sync", &work);
            let t = Instant::now();
            assert!(cm.rollback_to(&last).unwrap());
            rb.push(t.elapsed().as_secs_f64());
            assert!(cm.rollback_to(&cp_now).unwrap());
            // The shadow repository's rollback of the same 100 files, and forward again.
            sh("sync", &work);
            sgr.push(sh(&format!("{g} read-tree -u --reset HEAD~1"), &sandbox).as_secs_f64());
            sh(&format!("{g} read-tree -u --reset HEAD"), &sandbox);
            last = cp_now;
            eprintln!(
                "round {round}: checkpoint {:.1} ms, rollback {:.1} ms, shadow git {:.0} / {:.0} ms",
                ck[round] * 1e3,
                rb[round] * 1e3,
                sg[round] * 1e3,
                sgr[round] * 1e3
            );
        }
        let (c, r, p, s, sr) = (median(ck), median(rb), median(cp), median(sg), median(sgr));
        let (d, ch) = (median(disk), median(changed));
        println!(
            "| {strategy} | checkpoint, 100 files changed | {:.1} ms | {:.0} ms | {:.0} ms | {:.4}× | {:.3}× | ≤ 0.02× / ≤ 0.2× |",
            c * 1e3, p * 1e3, s * 1e3, c / p, c / s
        );
        println!(
            "| {strategy} | rollback, 100 files | {:.1} ms | — | {:.0} ms | — | {:.3}× | |",
            r * 1e3,
            sr * 1e3,
            r / sr
        );
        println!(
            "| {strategy} | disk per checkpoint | {:.0} KB | changed files: {:.0} KB | | {:.2}× the changed bytes | | ≤ 2× |",
            d / 1e3, ch / 1e3, d / ch
        );
        sb.cleanup().unwrap();
    }
    println!(
        "\nmedians of {rounds} rounds; {} files changed per round",
        files.len()
    );
    drop(cm);
    drop(plans);
    let _ = fs::remove_dir_all(&work);
}
