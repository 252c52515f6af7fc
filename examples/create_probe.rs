//! Times overlay creates in one session, each step alone (no benchmark harness around it):
//! `cargo run --release --example create_probe -- PROJECT ROOT N` makes the session's first
//! sandbox, then N fresh ones, then one chained from the first, and prints each time; then
//! edits 100 `.c`/`.h` files of the second sandbox (the benchmark's choice: every k-th
//! tracked one, a line appended) and times its finalize twice (the first one also copies
//! the pre-images into `base/`), and then times a create chained from it.
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mgr = patchbox::SandboxManager::with_options(
        PathBuf::from(&a[1]),
        patchbox::Options {
            root: Some(PathBuf::from(&a[2])),
            isolation: patchbox::Isolation::Overlay,
            no_prune_on_start: true,
            ..Default::default()
        },
    )
    .expect("manager");
    let n: usize = a[3].parse().expect("N");
    let t = Instant::now();
    let first = mgr.create_sandbox("first", None).expect("create");
    eprintln!("first {:?}", t.elapsed());
    for i in 0..n {
        let t = Instant::now();
        mgr.create_sandbox(&format!("c{i}"), None).expect("create");
        eprintln!("create {:?}", t.elapsed());
    }
    let t = Instant::now();
    mgr.create_sandbox("chain", Some(&first)).expect("chain");
    eprintln!("chained {:?}", t.elapsed());

    let out = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(&a[1])
        .output()
        .expect("git ls-files");
    let all: Vec<&str> = std::str::from_utf8(&out.stdout)
        .expect("utf-8 paths")
        .lines()
        .filter(|l| l.ends_with(".c") || l.ends_with(".h"))
        .collect();
    let files: Vec<&str> = all
        .iter()
        .step_by((all.len() / 100).max(1))
        .take(100)
        .copied()
        .collect();
    let sb = mgr.create_sandbox("edited", None).expect("create");
    for f in &files {
        let p = sb.path.join(f);
        let mut data = std::fs::read(&p).expect("read");
        data.extend_from_slice(b"/* edited by the delegation */\n");
        std::fs::write(&p, data).expect("write");
    }
    for _ in 0..2 {
        let t = Instant::now();
        let r = mgr.finalize_sandbox(&sb).expect("finalize");
        eprintln!(
            "finalize {:?} ({} files)",
            t.elapsed(),
            r.files_touched.len()
        );
    }
    // A chained create from the edited sandbox once the disk is quiet, as the benchmark's.
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::thread::sleep(std::time::Duration::from_millis(500));
    let t = Instant::now();
    mgr.create_sandbox("chain-edited", Some(&sb))
        .expect("chain");
    eprintln!("chained from the edited sandbox {:?}", t.elapsed());
}
