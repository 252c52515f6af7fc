//! The short form of the differential fuzzer of `patchbox::apply` (see `fuzz/README.md`): the
//! corpus in `fuzz/corpus/`, then `PATCHBOX_FUZZ_CASES` (default 300) generated cases from
//! `PATCHBOX_FUZZ_SEED` (default 1), each applied by patchbox and by `git apply`.
//!
//! Fails on any panic, write outside the project, change to the project after a refusal,
//! write in check mode, or difference from `git apply` that `fuzz/DIFFERENCES.md` does not
//! list. The long form is `cargo run --release --example fuzz_apply`.

#[path = "../fuzz/harness/mod.rs"]
mod harness;

use std::path::Path;
use std::sync::Mutex;

use harness::{generate, load_corpus, read_listed, Listed, Stats, Worker};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn listed() -> Listed {
    read_listed(&root().join("fuzz/DIFFERENCES.md"))
}

fn check(stats: &Stats, listed: &Listed) {
    let summary = stats.summary(listed);
    println!("{summary}");
    let bad = stats.count(|c| c.is_invariant_violation());
    let unlisted = stats.unlisted(listed);
    if bad > 0 || !unlisted.is_empty() {
        let dir = root().join("target/fuzz-findings-test");
        stats.write_reproducers(&dir, listed);
        panic!(
            "{bad} invariant violation(s), unlisted classes {unlisted:?}; reproducers in {}\n{summary}",
            dir.display()
        );
    }
}

#[test]
fn corpus_replays_clean() {
    let w = Worker::new();
    let corpus = load_corpus(&root().join("fuzz/corpus"), w.scratch.path());
    assert!(!corpus.is_empty(), "fuzz/corpus is empty");
    let mut w = w;
    let mut stats = Stats::default();
    for (name, case) in &corpus {
        let (class, why) = w.run(case);
        println!("{name}: {}", class.key());
        stats.add(case, class, why);
    }
    check(&stats, &listed());
}

#[test]
fn generated_cases_clean() {
    let cases = env_u64("PATCHBOX_FUZZ_CASES", 300);
    let seed = env_u64("PATCHBOX_FUZZ_SEED", 1);
    let jobs = 2;
    let loader = Worker::new();
    let corpus = load_corpus(&root().join("fuzz/corpus"), loader.scratch.path());
    let stats = Mutex::new(Stats::default());
    std::thread::scope(|s| {
        for j in 0..jobs {
            let (stats, corpus) = (&stats, &corpus);
            s.spawn(move || {
                let mut w = Worker::new();
                let mut i = j;
                while i < cases {
                    let case = generate(seed.wrapping_add(i), &w.repo, corpus);
                    let (class, why) = w.run(&case);
                    stats.lock().unwrap().add(&case, class, why);
                    i += jobs;
                }
            });
        }
    });
    let stats = stats.into_inner().unwrap();
    println!("seed {seed}, {cases} cases");
    check(&stats, &listed());
}
