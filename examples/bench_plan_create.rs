//! Plan sandbox creation on a large tree, side by side with `cp -a`: per round, a fresh
//! root, the first `overlay` sandbox of a plan (it takes the plan's own snapshot of the
//! tree), the plan's second and third over the same tree (they stack on that snapshot), and
//! a `cp -a` of the tree, alternating; medians over the rounds.
//!
//! With `--cow`, each round also times a `copy_on_write` create in the same plan (its base
//! is the plan's snapshot: one copy of the tree) and the inode-creation floor:
//! `cp -a --attributes-only` (every directory and file made, with its mode and times, no
//! byte of content copied).
//!
//! `cargo run --release --example bench_plan_create -- --tree DIR [--rounds 3] [--work DIR]
//! [--cow] [--more N]` (`--more`: N more creates in the plan per round, their median; `--work`: where roots and copies go, on the filesystem to measure; default next
//! to the tree). A round's roots and copies are removed after its last timed step, so each
//! round needs about three times the tree's size free (four with `--cow`). On an ext4
//! without a journal, run one round per run (see "Machine and method").
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use patchbox::plan::{PlanManager, Strategy};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn sync() {
    let _ = Command::new("sync").status();
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tree = PathBuf::from(arg(&args, "--tree").expect("--tree DIR"));
    let rounds: usize = arg(&args, "--rounds").map_or(3, |r| r.parse().expect("--rounds N"));
    let work = arg(&args, "--work").map_or_else(
        || {
            tree.parent()
                .unwrap_or(Path::new("/"))
                .join("bench-plan-create")
        },
        PathBuf::from,
    );
    std::fs::create_dir_all(&work).expect("work dir");
    let cow = args.iter().any(|a| a == "--cow");
    let more: usize = arg(&args, "--more").map_or(0, |n| n.parse().expect("--more N"));
    let mut more_medians = Vec::new();
    let (mut first, mut second, mut third, mut cp) = (vec![], vec![], vec![], vec![]);
    let (mut cows, mut floor) = (vec![], vec![]);
    let mut managers = Vec::new();
    for r in 0..rounds {
        let root = work.join(format!("root{r}"));
        let mgr = PlanManager::open(&root).expect("open");
        sync();
        let t = Instant::now();
        let a = mgr
            .get_or_create_sandbox("p", "r1", &tree, Strategy::Overlay)
            .expect("create");
        first.push(ms(t));
        sync();
        let t = Instant::now();
        let b = mgr
            .get_or_create_sandbox("p", "r2", &tree, Strategy::Overlay)
            .expect("create");
        second.push(ms(t));
        sync();
        let t = Instant::now();
        let c = mgr
            .get_or_create_sandbox("p", "r3", &tree, Strategy::Overlay)
            .expect("create");
        third.push(ms(t));
        // The plan's later creates, one after the other (no sync between them).
        let mut later = Vec::new();
        for i in 0..more {
            let t = Instant::now();
            let sb = mgr
                .get_or_create_sandbox("p", &format!("m{i}"), &tree, Strategy::Overlay)
                .expect("create");
            later.push(ms(t));
            drop(sb);
        }
        if more > 0 {
            let m = median(later.clone());
            let max = later.iter().cloned().fold(0.0, f64::max);
            println!("round {r}: {more} more overlay creates: median {m:.2} ms, max {max:.2} ms");
            more_medians.push(m);
        }
        let mode = a
            .context()
            .and_then(|c| c.metadata.get("overlay.mode").cloned());
        println!(
            "round {r}: overlay ({}) first {:.1} ms, second {:.1} ms, third {:.1} ms",
            mode.unwrap_or_default(),
            first[r],
            second[r],
            third[r]
        );
        managers.push((mgr, [a, b, c]));
        sync();
        let dst = work.join(format!("cp{r}"));
        let t = Instant::now();
        let ok = Command::new("cp")
            .arg("-a")
            .arg(&tree)
            .arg(&dst)
            .status()
            .is_ok_and(|s| s.success());
        cp.push(ms(t));
        assert!(ok, "cp -a failed");
        println!("round {r}: cp -a {:.1} ms", cp[r]);
        if cow {
            sync();
            let t = Instant::now();
            let _c = managers[0]
                .0
                .get_or_create_sandbox("p", "r4", &tree, Strategy::CopyOnWrite)
                .expect("create");
            cows.push(ms(t));
            sync();
            let dst = work.join(format!("floor{r}"));
            let t = Instant::now();
            let ok = Command::new("cp")
                .args(["-a", "--attributes-only"])
                .arg(&tree)
                .arg(&dst)
                .status()
                .is_ok_and(|s| s.success());
            floor.push(ms(t));
            assert!(ok, "cp -a --attributes-only failed");
            println!(
                "round {r}: copy_on_write {:.1} ms, cp -a --attributes-only {:.1} ms",
                cows[r], floor[r]
            );
        }
        let (mgr, sbs) = managers.pop().expect("this round's");
        drop(sbs);
        drop(mgr);
        let _ = std::fs::remove_dir_all(&root);
        for name in ["cp", "floor"] {
            let _ = std::fs::remove_dir_all(work.join(format!("{name}{r}")));
        }
    }
    let (f, s, t, c) = (median(first), median(second), median(third), median(cp));
    println!("\nmedians of {rounds} rounds (alternating with cp -a):");
    println!("| step | patchbox | cp -a | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| overlay create, a plan's first (takes its snapshot) | {f:.1} ms | {c:.1} ms | {:.3}× |",
        f / c
    );
    println!(
        "| overlay create, the plan's second | {s:.2} ms | | {:.5}× |",
        s / c
    );
    println!(
        "| overlay create, the plan's third | {t:.2} ms | | {:.5}× |",
        t / c
    );
    if more > 0 {
        let m = median(more_medians);
        println!("| overlay create, {more} more of the plan (median of the rounds' medians) | {m:.2} ms | | |");
    }
    if cow {
        let (w, fl) = (median(cows), median(floor));
        println!(
            "| copy_on_write create | {w:.1} ms | {c:.1} ms | {:.3}× |",
            w / c
        );
        println!(
            "| floor: cp -a --attributes-only (inodes, no content) | {fl:.1} ms | | {:.3}× |",
            fl / c
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}
