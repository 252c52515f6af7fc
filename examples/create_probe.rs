//! Times overlay creates in one session, each step alone (no benchmark harness around it):
//! `cargo run --release --example create_probe -- PROJECT ROOT N` makes the session's first
//! sandbox, then N fresh ones, then one chained from the first, and prints each time.
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
}
