//! Times `commit_all` of overlay sandboxes alone (for profiling):
//! `commit_probe ROOT ROUNDS ORIGINAL...`. Each round creates one overlay sandbox per
//! original in a new plan, appends a line to 100 `.c`/`.h` files of each, times
//! `commit_all`, then rolls the plan back (untimed).
use std::path::{Path, PathBuf};
use std::time::Instant;

use patchbox::plan::{PlanManager, Strategy};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: commit_probe ROOT ROUNDS ORIGINAL...");
        std::process::exit(2);
    }
    let mgr = PlanManager::open(&a[1]).expect("open");
    let rounds: usize = a[2].parse().expect("rounds");
    let origs: Vec<PathBuf> = a[3..].iter().map(PathBuf::from).collect();
    for o in &origs {
        mgr.prepare_snapshot(o).expect("prepare");
    }
    let edits = edit_list(&origs[0], 100);
    for r in 0..rounds {
        let plan = format!("probe{r}");
        for (i, o) in origs.iter().enumerate() {
            let sb = mgr
                .get_or_create_sandbox(&plan, &format!("r{i}"), o, Strategy::Overlay)
                .expect("create");
            let root = sb.get_path(Path::new("")).expect("path");
            for f in &edits {
                let p = root.join(f);
                let mut d = std::fs::read(&p).expect("read");
                d.extend_from_slice(b"/* edited */\n");
                std::fs::write(&p, d).expect("write");
            }
        }
        // Let the edits' writeback settle, as the bench does.
        std::thread::sleep(std::time::Duration::from_secs(2));
        // Markers for `strace`: the commit's system calls lie between these two stats.
        let _ = std::fs::File::open("/commit_probe-start");
        let t = Instant::now();
        let res = mgr.commit_all(&plan).expect("commit_all");
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let _ = std::fs::File::open("/commit_probe-end");
        assert!(res.iter().all(|c| c.success));
        // CLOCK_MONOTONIC seconds of the start and the end, for `perf record -k monotonic`.
        let mono = |i: Instant| {
            let ago = Instant::now().duration_since(i).as_secs_f64();
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9 - ago
        };
        let start = mono(t);
        println!(
            "round {r}: commit_all {ms:.1} ms (monotonic {start:.6} to {:.6})",
            start + ms / 1000.0
        );
        mgr.rollback_all(&plan).expect("rollback");
        mgr.cleanup_all(&plan).expect("cleanup");
    }
}

/// Every k-th `.c`/`.h` file under `root` (sorted walk), `n` of them.
fn edit_list(root: &Path, n: usize) -> Vec<PathBuf> {
    let mut all = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            let ft = e.file_type().expect("type");
            if ft.is_dir() && e.file_name() != ".git" {
                stack.push(p);
            } else if ft.is_file() && p.extension().is_some_and(|x| x == "c" || x == "h") {
                all.push(p.strip_prefix(root).expect("below").to_path_buf());
            }
        }
    }
    all.sort();
    let step = (all.len() / n).max(1);
    all.into_iter().step_by(step).take(n).collect()
}
