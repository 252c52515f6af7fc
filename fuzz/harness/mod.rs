//! The structure-aware differential fuzzer of `patchbox::apply`, shared by the short form
//! (`tests/fuzz_apply.rs`) and the long form (`examples/fuzz_apply.rs`). See `fuzz/README.md`.
//!
//! One case: a project tree (text files with few distinct lines, binary files, symlinks,
//! executables, nested dirs, odd names), a patch (made by `git diff --binary` between that tree
//! and an edited copy, or by this crate's writer, or taken from the corpus), then 0–4
//! structure-aware mutations of the patch text, and sometimes local drift in the project.
//!
//! Each case is applied by patchbox (check mode, then for real, in `P/proj`, `P` being a
//! fingerprinted parent holding `outside/` and `sibling.txt`) and by `git apply` on a copy in
//! another directory. Invariants checked on every case: no panic, nothing outside `P/proj`
//! changed, a refusal (or `Err`, or nothing to do) leaves the project byte-identical (modes
//! and mtimes included), check mode writes nothing and predicts the real outcome. Then the
//! two results are compared and every disagreement gets a class (see [`Class`]).
//!
//! One submodule per step: `tree` (project trees), `patches` (`git diff` and the writer),
//! `mutate` (mutations of patch text), `case` (a case, the corpus, generation), `git`
//! (`git apply`), `fingerprint` (what changed on disk), `check` (running a case, the
//! oracle), `stats` (the listed differences, the figures). Everything public is re-exported
//! here.
#![allow(dead_code)]

/// Stands for the absolute path of the case's `outside/` directory in patches and symlink
/// targets; replaced when the case runs.
pub const OUTSIDE: &str = "@OUTSIDE@";

// ------------------------------------------------------------------------------------------
// Random numbers
// ------------------------------------------------------------------------------------------

/// SplitMix64: small, seedable, good enough for choosing mutations.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// `git` isolated from the user's configuration: the tests' own runner.
#[path = "../../tests/gitcmd/mod.rs"]
mod gitcmd;
pub use gitcmd::git_cmd;

mod case;
mod check;
mod fingerprint;
mod git;
mod mutate;
mod patches;
mod stats;
mod tree;

// The harness's surface is what it was as one file: every public item at `harness::`. Each
// user (the test, the example) takes a different part of it.
#[allow(unused_imports)]
pub use {case::*, check::*, fingerprint::*, git::*, mutate::*, patches::*, stats::*, tree::*};
