//! Part of a patch, by files or hunks (`patch::select`), against `git apply` as the oracle: the
//! chosen part applies to the pre-image, the rest applies to what the chosen part made, and
//! the two together make exactly what the whole patch makes.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use patchbox::patch::select::{split, HunkPick, Preimage, SelectError, Selection};
use patchbox::patch::write::{write_file_diff, Side};
use patchbox::RelPath;

/// A small deterministic generator (no timing, no global state).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn diff(path: &str, old: &[u8], new: &[u8]) -> Vec<u8> {
    let p = RelPath::new(path).unwrap();
    let mut out = Vec::new();
    write_file_diff(
        &mut out,
        Some(Side {
            path: &p,
            mode: 0o100644,
            data: old,
        }),
        Some(Side {
            path: &p,
            mode: 0o100644,
            data: new,
        }),
    );
    out
}

/// Applies `patch` with `git apply` to a copy of `dir` and returns the copy.
fn git_applied(dir: &Path, patch: &[u8], scratch: &Path) -> std::path::PathBuf {
    git_apply_copy(dir, patch, scratch)
}

#[test]
fn chosen_hunks_then_the_rest_make_the_whole_patch_as_git_applies_it() {
    let mut rng = Lcg(7);
    let scratch = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for case in 0..24 {
        // A file of 40..80 lines; every eighth or so line changed, some deleted, some added;
        // half the cases end without a newline.
        let n = 40 + rng.next(40) as usize;
        let mut old: Vec<String> = (0..n).map(|i| format!("line {i}\n")).collect();
        if case % 2 == 1 {
            let last = old.pop().unwrap();
            old.push(last.trim_end().to_string());
        }
        let mut new = Vec::new();
        for (i, l) in old.iter().enumerate() {
            match rng.next(10) {
                0 => {}                                    // deleted
                1 => new.push(format!("changed {i} {l}")), // changed
                2 => {
                    new.push(l.clone());
                    new.push(format!("added after {i}\n"));
                }
                _ => new.push(l.clone()),
            }
        }
        let (old, new) = (old.concat().into_bytes(), new.concat().into_bytes());
        let patch = diff("f.txt", &old, &new);
        if patch.is_empty() {
            continue;
        }
        let hunks = patchbox::patch::parse::parse_patch(&patch).unwrap().files[0]
            .hunks
            .len();
        if hunks < 2 {
            continue;
        }
        let picked: Vec<usize> = (1..=hunks).filter(|_| rng.next(2) == 0).collect();
        if picked.is_empty() || picked.len() == hunks {
            continue;
        }
        let base = |_: &RelPath| -> patchbox::Result<Option<Preimage>> {
            Ok(Some((0o100644, old.clone())))
        };
        let sel = Selection {
            hunks: vec![HunkPick {
                path: "f.txt".into(),
                hunks: picked.clone(),
            }],
            ..Default::default()
        };
        let s = split(&patch, &sel, &base).unwrap();
        let dir = scratch.path().join(format!("case{case}"));
        write(&dir, "f.txt", &old);
        let mid = git_applied(&dir, &s.chosen, scratch.path());
        let mid_bytes = fs::read(mid.join("f.txt")).unwrap();
        assert_eq!(
            s.rest_preimages[0].1 .1, mid_bytes,
            "case {case}: the rest's pre-image"
        );
        let full = git_applied(&mid, &s.rest, scratch.path());
        assert_eq!(
            fs::read(full.join("f.txt")).unwrap(),
            new,
            "case {case}: {picked:?}"
        );
        // The chosen part changed only what its hunks touch: its own patch has that many.
        let chosen_hunks = patchbox::patch::parse::parse_patch(&s.chosen)
            .unwrap()
            .files[0]
            .hunks
            .len();
        assert!(chosen_hunks <= picked.len(), "case {case}");
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} cases had hunks to split");
}

#[test]
fn whole_files_keep_their_bytes_and_hunks_of_a_rename_or_binary_are_refused() {
    let text = b"diff --git a/old.txt b/new.txt\nsimilarity index 90%\nrename from old.txt\nrename to new.txt\n--- a/old.txt\n+++ b/new.txt\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n@@ -9,2 +9,2 @@\n-x\n+X\n y\n\
diff --git a/keep.txt b/keep.txt\n--- a/keep.txt\n+++ b/keep.txt\n@@ -1 +1 @@\n-1\n+2\n";
    let none = |_: &RelPath| -> patchbox::Result<Option<Preimage>> { Ok(None) };
    let only = Selection {
        only: vec!["keep.txt".into()],
        ..Default::default()
    };
    let s = split(text, &only, &none).unwrap();
    assert!(s.chosen.starts_with(b"diff --git a/keep.txt b/keep.txt\n"));
    assert!(s
        .rest
        .starts_with(b"diff --git a/old.txt b/new.txt\nsimilarity"));
    assert_eq!(
        s.chosen.len() + s.rest.len(),
        text.len(),
        "cut, not rewritten"
    );
    let names: Vec<String> = s.rest_paths.iter().map(|p| p.to_string()).collect();
    assert_eq!(names, ["old.txt", "new.txt"]);

    let hunks = Selection {
        hunks: vec![HunkPick::parse("new.txt:1").unwrap()],
        ..Default::default()
    };
    assert!(matches!(
        split(text, &hunks, &none),
        Err(SelectError::NotSplittable { .. })
    ));
    let missing = Selection {
        hunks: vec![HunkPick::parse("keep.txt:2").unwrap()],
        ..Default::default()
    };
    assert!(matches!(
        split(text, &missing, &none),
        Err(SelectError::NoSuchHunk {
            count: 1,
            hunk: 2,
            ..
        })
    ));
    for bad in ["keep.txt", ":1", "keep.txt:0", "keep.txt:3-1", "keep.txt:x"] {
        assert!(HunkPick::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_pre_image_that_does_not_match_is_refused() {
    let old: Vec<u8> = (0..30)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect();
    let new = String::from_utf8(old.clone())
        .unwrap()
        .replace("\n2\n", "\ntwo\n")
        .replace("\n27\n", "\nx\n");
    let patch = diff("f.txt", &old, new.as_bytes());
    let wrong = |_: &RelPath| -> patchbox::Result<Option<Preimage>> {
        Ok(Some((0o100644, b"something else\n".to_vec())))
    };
    let sel = Selection {
        hunks: vec![HunkPick::parse("f.txt:1").unwrap()],
        ..Default::default()
    };
    assert!(matches!(
        split(&patch, &sel, &wrong),
        Err(SelectError::PreimageMismatch(_))
    ));
    let none = |_: &RelPath| -> patchbox::Result<Option<Preimage>> { Ok(None) };
    assert!(matches!(
        split(&patch, &sel, &none),
        Err(SelectError::NoPreimage(_))
    ));
}
