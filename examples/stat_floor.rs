//! The floor of a `copy_on_write` checkpoint (and diff): one `lstat` per node of the tree,
//! which is how its diff finds what changed. Prints the median of `--rounds` walks of `DIR`
//! with the library's parallel walker (`tree::snapshot::list_tree`).
//!
//! ```text
//! cargo run --release --example stat_floor -- DIR [--rounds N]
//! ```

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1).map(PathBuf::from) else {
        eprintln!("usage: stat_floor DIR [--rounds N]");
        std::process::exit(2);
    };
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let mut times = Vec::new();
    let mut nodes = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        match patchbox::tree::snapshot::list_tree(&dir) {
            Ok(l) => nodes = l.len(),
            Err(e) => {
                eprintln!("stat_floor: {e}");
                std::process::exit(1);
            }
        }
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{nodes} nodes: list_tree median {:.1} ms (min {:.1} ms) over {rounds} rounds",
        times[times.len() / 2] * 1e3,
        times[0] * 1e3
    );
}
