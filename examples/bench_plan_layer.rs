//! Plan `overlay` sandbox creation over the project's shared lower layer, side by side with
//! `git worktree add` and `cp -a`: per round, a fresh root; a plan's first create (the
//! project's first: it writes the shared layer and the plan's snapshot over it), the plan's
//! second (it stacks the plan's snapshot: a mount), a new plan's first once the layer exists
//! (the walk of the project and a copy of what differs from the layer, then a mount), a
//! `git worktree add` of HEAD and a `cp -a` of the tree, alternating; medians over the
//! rounds. Each round also times the stat-walk floor: what learning whether the project
//! changed since the layer was made costs at least, one `lstat` per file with the library's
//! parallel walker (`tree::snapshot::list_tree`), and the selection walk a snapshot does
//! (`tree::select::select_project`: the walk, the index read, the ignore rules).
//!
//! `cargo run --release --example bench_plan_layer -- --tree DIR [--rounds 3] [--work DIR]`
//! (`DIR`: a git work tree with at least 2,000 clean tracked files, else no layer is used —
//! see `PATCHBOX_SHARED_LOWER_MIN`; `--work`: where roots, worktrees and copies go, on the
//! filesystem to measure; default next to the tree).
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

fn run(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tree = PathBuf::from(arg(&args, "--tree").expect("--tree DIR"));
    let tree = std::fs::canonicalize(&tree).expect("the tree");
    let rounds: usize = arg(&args, "--rounds").map_or(3, |r| r.parse().expect("--rounds N"));
    let work = arg(&args, "--work").map_or_else(
        || {
            tree.parent()
                .unwrap_or(Path::new("/"))
                .join("bench-plan-layer")
        },
        PathBuf::from,
    );
    std::fs::create_dir_all(&work).expect("work dir");
    let names = [
        "overlay, a plan's first (the project's first: writes the layer)",
        "overlay, the plan's second",
        "overlay, a new plan's first (the layer exists)",
        "git worktree add",
        "cp -a",
        "floor: lstat walk (list_tree)",
        "floor: selection walk (select_project)",
    ];
    let mut t: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for r in 0..rounds {
        let root = work.join(format!("root{r}"));
        let mgr = PlanManager::open(&root).expect("open");
        let mut timed = |i: usize, f: &mut dyn FnMut()| {
            sync();
            let s = Instant::now();
            f();
            t[i].push(ms(s));
        };
        let mut held = Vec::new();
        let mut mode = String::new();
        timed(0, &mut || {
            let sb = mgr
                .get_or_create_sandbox("a", "r1", &tree, Strategy::Overlay)
                .expect("create");
            mode = sb
                .context()
                .map(|c| c.metadata["overlay.mode"].clone())
                .unwrap_or_default();
            held.push(sb);
        });
        timed(1, &mut || {
            held.push(
                mgr.get_or_create_sandbox("a", "r2", &tree, Strategy::Overlay)
                    .expect("create"),
            )
        });
        timed(2, &mut || {
            held.push(
                mgr.get_or_create_sandbox("b", "r1", &tree, Strategy::Overlay)
                    .expect("create"),
            )
        });
        let wt = work.join(format!("wt{r}"));
        timed(3, &mut || {
            let ok = run(Command::new("git")
                .arg("-C")
                .arg(&tree)
                .args(["worktree", "add", "--detach"])
                .arg(&wt)
                .arg("HEAD"));
            assert!(ok, "git worktree add failed");
        });
        let cp = work.join(format!("cp{r}"));
        timed(4, &mut || {
            assert!(
                run(Command::new("cp").arg("-a").arg(&tree).arg(&cp)),
                "cp -a failed"
            );
        });
        timed(5, &mut || {
            patchbox::tree::snapshot::list_tree(&tree).expect("walk");
        });
        timed(6, &mut || {
            patchbox::tree::select::select_project(&tree, std::slice::from_ref(&root))
                .expect("select");
        });
        println!(
            "round {r} ({mode}): {}",
            names
                .iter()
                .zip(&t)
                .map(|(n, v)| format!("{n} {:.1} ms", v[r]))
                .collect::<Vec<_>>()
                .join(", ")
        );
        drop(held);
        drop(mgr);
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_dir_all(&cp);
        run(Command::new("git")
            .arg("-C")
            .arg(&tree)
            .args(["worktree", "remove", "--force"])
            .arg(&wt));
        run(Command::new("git")
            .arg("-C")
            .arg(&tree)
            .args(["worktree", "prune"]));
    }
    let cp = median(t[4].clone());
    println!("\nmedians of {rounds} rounds (alternating):");
    println!("| step | median | against cp -a |");
    println!("|---|---|---|");
    for (n, v) in names.iter().zip(t) {
        let m = median(v);
        println!("| {n} | {m:.1} ms | {:.3}× |", m / cp);
    }
    let _ = std::fs::remove_dir_all(&work);
}
