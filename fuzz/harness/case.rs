//! One fuzz case (project, pre-images, patch, origin): its file format for the corpus and
//! findings, loading the corpus, and generating a case from a seed.

use std::fs;
use std::path::{Path, PathBuf};

use super::git::git_apply;
use super::mutate::mutate;
use super::patches::{writer_patch, DiffRepo, DIFF_ARGS};
use super::tree::{drift_tree, edit_tree, random_tree, read_tree, Tree};
use super::Rng;

/// One input: the project, optionally the pre-images for a 3-way merge, the patch.
#[derive(Clone, Debug)]
pub struct Case {
    pub project: Tree,
    pub preimages: Option<Tree>,
    pub conflict_markers: bool,
    pub patch: Vec<u8>,
    /// How it was made (source, mutations): for the report.
    pub origin: String,
}

const SETUP: &str = "==== fuzz-case: setup ====\n";
const PREIMAGES: &str = "==== fuzz-case: preimages ====\n";
const PATCH: &str = "==== fuzz-case: patch ====\n";

impl Case {
    /// The case file: comment lines, the project and the pre-images as creation patches
    /// (this crate's writer; `git apply` rebuilds them), then the patch, verbatim.
    pub fn to_file(&self, comment: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for l in comment.lines() {
            out.extend_from_slice(format!("# {l}\n").as_bytes());
        }
        let opts = if self.conflict_markers {
            "conflict_markers"
        } else {
            ""
        };
        out.extend_from_slice(format!("# options: {opts}\n").as_bytes());
        out.extend_from_slice(SETUP.as_bytes());
        out.extend_from_slice(&writer_patch(&Tree::new(), &self.project));
        if let Some(p) = &self.preimages {
            out.extend_from_slice(PREIMAGES.as_bytes());
            out.extend_from_slice(&writer_patch(&Tree::new(), p));
        }
        out.extend_from_slice(PATCH.as_bytes());
        out.extend_from_slice(&self.patch);
        out
    }

    /// Reads a case file; the trees are rebuilt with `git apply` in `scratch`.
    pub fn from_file(bytes: &[u8], scratch: &Path, origin: &str) -> Case {
        let find = |m: &str| bytes.windows(m.len()).position(|w| w == m.as_bytes());
        let setup_at = find(SETUP).expect("case file without setup marker");
        let patch_at = find(PATCH).expect("case file without patch marker");
        let pre_at = find(PREIMAGES).filter(|&p| p < patch_at);
        let head = String::from_utf8_lossy(&bytes[..setup_at]);
        let conflict_markers = head
            .lines()
            .any(|l| l.starts_with("# options:") && l.contains("conflict_markers"));
        let setup = &bytes[setup_at + SETUP.len()..pre_at.unwrap_or(patch_at)];
        let build = |text: &[u8], name: &str| -> Tree {
            let dir = scratch.join(name);
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            if !text.is_empty() {
                let home = scratch.join("home");
                fs::create_dir_all(&home).unwrap();
                let (ok, err) = git_apply(&dir, &home, text);
                assert!(ok, "{origin}: git apply of the {name} failed: {err}");
            }
            let t = read_tree(&dir);
            fs::remove_dir_all(&dir).unwrap();
            t
        };
        let project = build(setup, "setup");
        let preimages = pre_at.map(|p| build(&bytes[p + PREIMAGES.len()..patch_at], "preimages"));
        Case {
            project,
            preimages,
            conflict_markers,
            patch: bytes[patch_at + PATCH.len()..].to_vec(),
            origin: origin.to_string(),
        }
    }
}

/// Loads `dir/*.case`, sorted by name.
pub fn load_corpus(dir: &Path, scratch: &Path) -> Vec<(String, Case)> {
    let mut names: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "case"))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = fs::read(&p).unwrap();
            let case = Case::from_file(&bytes, scratch, &name);
            (name, case)
        })
        .collect()
}

/// Makes a case from `seed`: a tree, an edited copy, a patch between them (git's or this
/// crate's), or a corpus case; then mutations and sometimes drift.
pub fn generate(seed: u64, repo: &DiffRepo, corpus: &[(String, Case)]) -> Case {
    let mut rng = Rng::new(seed);
    let (mut project, patch, mut origin, base) = if !corpus.is_empty() && rng.chance(1, 5) {
        let (name, c) = rng.pick(corpus);
        (
            c.project.clone(),
            c.patch.clone(),
            format!("corpus {name}"),
            c.preimages.clone(),
        )
    } else {
        let base = random_tree(&mut rng);
        let head = edit_tree(&mut rng, &base);
        if rng.chance(1, 4) {
            let p = writer_patch(&base, &head);
            (base.clone(), p, "patchbox writer".to_string(), Some(base))
        } else {
            let args = rng.pick(DIFF_ARGS);
            let p = repo.diff(&base, &head, args);
            (
                base.clone(),
                p,
                format!("git diff --binary {}", args.join(" ")),
                Some(base),
            )
        }
    };
    let mut preimages = None;
    if rng.chance(1, 5) {
        project = drift_tree(&mut rng, &project);
        origin.push_str(" + drift");
        if rng.chance(1, 2) {
            preimages = base;
            origin.push_str(" + preimages");
        }
    }
    origin = format!("seed {seed}: {origin}");
    let conflict_markers = rng.chance(1, 12);
    if conflict_markers {
        origin.push_str(" + conflict markers");
    }
    let (patch, muts) = mutate(&mut rng, &patch);
    if !muts.is_empty() {
        origin.push_str(&format!("; mutations: {}", muts.join(", ")));
    }
    Case {
        project,
        preimages,
        conflict_markers,
        patch,
        origin,
    }
}
