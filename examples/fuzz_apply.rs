//! The long form of the differential fuzzer of `patchbox::apply` (see `fuzz/README.md`).
//!
//! ```text
//! PATCHBOX_FUZZ_SECONDS=3600 cargo run --release --example fuzz_apply
//! ```
//! Environment: `PATCHBOX_FUZZ_SECONDS` (time budget, default 60), `PATCHBOX_FUZZ_SEED`
//! (default: from the clock; printed), `PATCHBOX_FUZZ_JOBS` (worker threads, default 2),
//! `PATCHBOX_FUZZ_FINDINGS` (where the smallest reproducer of each class is written, default
//! `target/fuzz-findings`), `PATCHBOX_FUZZ_CORPUS` (the corpus directory, default `fuzz/corpus`;
//! a seed replays the same case only with the same corpus), `PATCHBOX_FUZZ_REPLAY` (a `.case`
//! file or a case seed: run only that; `PATCHBOX_FUZZ_REPLAY_SAVE=FILE` saves it as a case file).
//! Exits non-zero on any invariant violation or unlisted difference.

#[path = "../fuzz/harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use harness::{generate, load_corpus, read_listed, Case, Stats, Worker};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = read_listed(&root.join("fuzz/DIFFERENCES.md"));
    let findings = std::env::var_os("PATCHBOX_FUZZ_FINDINGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/fuzz-findings"));
    let loader = Worker::new();
    let corpus_dir = std::env::var_os("PATCHBOX_FUZZ_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("fuzz/corpus"));
    let corpus = load_corpus(&corpus_dir, loader.scratch.path());

    if let Ok(replay) = std::env::var("PATCHBOX_FUZZ_REPLAY") {
        let mut w = Worker::new();
        let case = match replay.parse::<u64>() {
            Ok(seed) => generate(seed, &w.repo, &corpus),
            Err(_) => {
                let bytes = std::fs::read(&replay).expect("read the case file");
                Case::from_file(&bytes, w.scratch.path(), &replay)
            }
        };
        let (class, why) = w.run(&case);
        if let Ok(out) = std::env::var("PATCHBOX_FUZZ_REPLAY_SAVE") {
            std::fs::write(
                &out,
                case.to_file(&format!("class: {}\norigin: {}", class.key(), case.origin)),
            )
            .unwrap();
        }
        println!(
            "origin: {}\nclass: {} [{}]\nwhy: {why}",
            case.origin,
            class.key(),
            listed.status(&class)
        );
        println!("---- patch ----\n{}", String::from_utf8_lossy(&case.patch));
        std::process::exit(i32::from(
            listed.status(&class) == "UNLISTED" || class.is_invariant_violation(),
        ));
    }

    let seconds = env_u64("PATCHBOX_FUZZ_SECONDS").unwrap_or(60);
    let jobs = env_u64("PATCHBOX_FUZZ_JOBS").unwrap_or(2).max(1);
    let seed = env_u64("PATCHBOX_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            % 1_000_000_000_000
    });
    println!(
        "patchbox fuzz: seed {seed}, {seconds} s, {jobs} jobs, corpus {} cases",
        corpus.len()
    );
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let stats = Mutex::new(Stats::default());

    // The corpus first, then generated cases until the deadline.
    {
        let mut w = Worker::new();
        for (_, case) in &corpus {
            let (class, why) = w.run(case);
            stats.lock().unwrap().add(case, class, why);
        }
    }
    std::thread::scope(|s| {
        for j in 0..jobs {
            let (stats, corpus) = (&stats, &corpus);
            s.spawn(move || {
                let mut w = Worker::new();
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let case_seed = seed.wrapping_add(i * jobs + j);
                    i += 1;
                    let case = generate(case_seed, &w.repo, corpus);
                    let (class, why) = w.run(&case);
                    let mut st = stats.lock().unwrap();
                    if class.needs_listing() && !st.classes.contains_key(&class.key()) {
                        eprintln!(
                            "new class {} (seed {case_seed}): {}",
                            class.key(),
                            why.lines().next().unwrap_or("")
                        );
                    }
                    st.add(&case, class, why);
                    if st.cases % 2000 == 0 {
                        eprintln!("{} cases, {:.0} s", st.cases, start.elapsed().as_secs_f64());
                    }
                }
            });
        }
    });
    let stats = stats.into_inner().unwrap();
    stats.write_reproducers(&findings, &listed);
    println!("seed: {seed}\ntime: {:.0} s", start.elapsed().as_secs_f64());
    print!("{}", stats.summary(&listed));
    println!("reproducers: {}", findings.display());
    let bad =
        stats.count(|c| c.is_invariant_violation()) > 0 || !stats.unlisted(&listed).is_empty();
    std::process::exit(i32::from(bad));
}
