//! Choosing part of a patch: some of its files (`--only`, `--exclude`) and some hunks of a
//! file (`--hunks PATH:1,3`), and the rest as a patch of its own that still applies once
//! the chosen part has landed.
//!
//! Whole files are cut from the patch text as they are (binary data, renames and modes
//! included). A file split by hunks is rebuilt from contents: with its pre-image `base`,
//! `mid` is `base` with the chosen hunks and `full` is `base` with all of them; the chosen
//! part is the diff `base → mid`, the rest the diff `mid → full`, whose pre-image is `mid`
//! (what [`Split::rest_preimages`] hands back, to be stored with the rest). The hunks of one
//! diff never overlap, so applying a subset of them to `base` at their stated lines is exact;
//! the pre-image is checked against every hunk first.

use std::ops::Range;

use thiserror::Error;

use super::model::{FilePatch, Hunk, MODE_FILE};
use super::parse::parse_patch;
use super::write::{write_file_diff, Side};
use crate::fs::relpath::RelPath;

/// Which parts of a patch to take. Paths are pathspecs as git reads them without magic: a
/// path names that file, or every file under it when it is a directory.
///
/// ```
/// use patchbox::patch::select::{HunkPick, Selection};
/// let sel = Selection { hunks: vec![HunkPick::parse("src/a.rs:1,3-4")?], ..Default::default() };
/// assert_eq!(sel.hunks[0].hunks, [1, 3, 4]);
/// # Ok::<(), patchbox::patch::select::SelectError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Take only the files under these pathspecs (every file when empty and `hunks` is empty
    /// too).
    pub only: Vec<String>,
    /// Leave out the files under these pathspecs.
    pub exclude: Vec<String>,
    /// Take only these hunks of these files (they count from 1, in patch order).
    pub hunks: Vec<HunkPick>,
}

impl Selection {
    /// True when nothing narrows the patch: everything is taken.
    pub fn is_everything(&self) -> bool {
        self.only.is_empty() && self.exclude.is_empty() && self.hunks.is_empty()
    }
}

/// Some hunks of one file: `PATH:1,3` or `PATH:2-4`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HunkPick {
    /// The file, as the patch names it (its new path).
    pub path: String,
    /// 1-based hunk numbers, ascending, without repeats.
    pub hunks: Vec<usize>,
}

impl HunkPick {
    /// Reads `PATH:N[,N|,N-M]…` (the path is everything before the last `:`).
    pub fn parse(spec: &str) -> Result<HunkPick, SelectError> {
        let bad = || SelectError::BadHunkSpec(spec.to_string());
        let (path, list) = spec.rsplit_once(':').ok_or_else(bad)?;
        if path.is_empty() {
            return Err(bad());
        }
        let mut hunks = Vec::new();
        for part in list.split(',') {
            let num = |s: &str| s.trim().parse::<usize>().ok().filter(|n| *n > 0);
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?);
                    if a > b {
                        return Err(bad());
                    }
                    hunks.extend(a..=b);
                }
                None => hunks.push(num(part).ok_or_else(bad)?),
            }
        }
        hunks.sort_unstable();
        hunks.dedup();
        Ok(HunkPick {
            path: path.to_string(),
            hunks,
        })
    }
}

/// Why a selection cannot be made. Nothing is written when one is returned.
#[derive(Debug, Error)]
pub enum SelectError {
    /// A `--hunks` argument that is not `PATH:N[,N…]`.
    #[error("bad hunk selection {0:?}: expected PATH:N[,N|,N-M]…")]
    BadHunkSpec(String),
    /// A pathspec that names no file of the patch (git: "did not match any files").
    #[error("pathspec {0:?} did not match any file of the patch")]
    NoMatch(String),
    /// A hunk number past the file's hunks.
    #[error("{path} has {count} hunk(s); there is no hunk {hunk}")]
    NoSuchHunk {
        /// The file.
        path: String,
        /// Its number of hunks.
        count: usize,
        /// The number asked for.
        hunk: usize,
    },
    /// Hunks of a file that cannot be split: binary, renamed or copied.
    #[error("{path}: cannot take some hunks of a {what}; take or leave the whole file")]
    NotSplittable {
        /// The file.
        path: String,
        /// What it is.
        what: &'static str,
    },
    /// A file split by hunks whose pre-image is not stored.
    #[error("{0}: no pre-image is stored for it, so its hunks cannot be taken apart")]
    NoPreimage(String),
    /// A file split by hunks whose pre-image does not match the patch's old lines.
    #[error("{0}: its stored pre-image does not match the patch")]
    PreimageMismatch(String),
    /// The selection takes nothing.
    #[error("the selection takes nothing from the patch")]
    Empty,
    /// The patch text could not be read, or a pre-image could not.
    #[error(transparent)]
    Core(#[from] crate::Error),
}

/// A file's pre-image: its git mode and contents (or link target).
pub type Preimage = (u32, Vec<u8>);

/// Reads the pre-image of a path (`None`: none stored).
pub type PreimageReader<'a> = &'a dyn Fn(&RelPath) -> crate::Result<Option<Preimage>>;

/// A patch cut in two.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// The chosen part, a patch on its own (never empty).
    pub chosen: Vec<u8>,
    /// The rest (empty when everything was chosen).
    pub rest: Vec<u8>,
    /// The paths the rest reads or writes, in patch order.
    pub rest_paths: Vec<RelPath>,
    /// Pre-images of the rest that are not the original's: for each file split by hunks,
    /// its contents once the chosen hunks are in.
    pub rest_preimages: Vec<(RelPath, Preimage)>,
}

/// Cuts `text` by `sel`. `base` gives the pre-images of files split by hunks.
///
/// ```
/// use patchbox::patch::select::{split, HunkPick, Selection};
/// let text = b"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-1\n+one\n@@ -5 +5 @@\n-5\n+five\n";
/// let base = |_: &patchbox::RelPath| Ok(Some((0o100644, b"1\n2\n3\n4\n5\n".to_vec())));
/// let sel = Selection { hunks: vec![HunkPick::parse("f:2")?], ..Default::default() };
/// let s = split(text, &sel, &base)?;
/// assert!(String::from_utf8_lossy(&s.chosen).contains("+five"));
/// assert!(String::from_utf8_lossy(&s.rest).contains("+one"));
/// assert_eq!(s.rest_preimages[0].1 .1, b"1\n2\n3\n4\nfive\n");
/// # Ok::<(), patchbox::patch::select::SelectError>(())
/// ```
pub fn split(text: &[u8], sel: &Selection, base: PreimageReader<'_>) -> Result<Split, SelectError> {
    let patch = parse_patch(text)?;
    let sections = sections(text, &patch.files);
    let matches = |spec: &str, f: &FilePatch| {
        let spec = spec.trim_end_matches('/');
        [f.old_path.as_ref(), f.new_path.as_ref()]
            .into_iter()
            .flatten()
            .any(|p| {
                let b = p.as_bytes();
                spec == "." || b == spec.as_bytes() || {
                    b.starts_with(spec.as_bytes()) && b.get(spec.len()) == Some(&b'/')
                }
            })
    };
    for spec in sel.only.iter().chain(&sel.exclude) {
        if !patch.files.iter().any(|f| matches(spec, f)) {
            return Err(SelectError::NoMatch(spec.clone()));
        }
    }
    for pick in &sel.hunks {
        if !patch.files.iter().any(|f| same_file(&pick.path, f)) {
            return Err(SelectError::NoMatch(pick.path.clone()));
        }
    }
    let mut out = Split::default();
    for (f, range) in patch.files.iter().zip(sections) {
        let raw = &text[range];
        let pick = sel.hunks.iter().find(|p| same_file(&p.path, f));
        let whole = match pick {
            Some(_) => false,
            None => {
                let listed = if sel.only.is_empty() {
                    sel.hunks.is_empty()
                } else {
                    sel.only.iter().any(|s| matches(s, f))
                };
                listed && !sel.exclude.iter().any(|s| matches(s, f))
            }
        };
        let rest_paths = |out: &mut Split| {
            for p in [f.old_path.as_ref(), f.new_path.as_ref()]
                .into_iter()
                .flatten()
            {
                if !out.rest_paths.contains(p) {
                    out.rest_paths.push(p.clone());
                }
            }
        };
        match pick {
            None if whole => out.chosen.extend_from_slice(raw),
            None => {
                out.rest.extend_from_slice(raw);
                rest_paths(&mut out);
            }
            Some(p) => {
                let all: Vec<usize> = (1..=f.hunks.len()).collect();
                if let Some(&h) = p.hunks.iter().find(|h| **h > f.hunks.len()) {
                    return Err(SelectError::NoSuchHunk {
                        path: p.path.clone(),
                        count: f.hunks.len(),
                        hunk: h,
                    });
                }
                if p.hunks == all {
                    out.chosen.extend_from_slice(raw);
                    continue;
                }
                let (chosen, rest, pre) = split_file(f, &p.hunks, base)?;
                out.chosen.extend_from_slice(&chosen);
                out.rest.extend_from_slice(&rest);
                rest_paths(&mut out);
                out.rest_preimages.push(pre);
            }
        }
    }
    if out.chosen.is_empty() {
        return Err(SelectError::Empty);
    }
    Ok(out)
}

/// True when `spec` names file patch `f` (its new path, or its old one for a deletion).
fn same_file(spec: &str, f: &FilePatch) -> bool {
    f.path().is_some_and(|p| p.as_bytes() == spec.as_bytes())
}

/// Each file patch's bytes in `text`: from its first header line to the next one's (the
/// first also takes whatever precedes it, a commit message, say).
fn sections(text: &[u8], files: &[FilePatch]) -> Vec<Range<usize>> {
    let mut starts = vec![0usize];
    starts.extend(
        text.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    let at = |line: usize| {
        starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(text.len())
    };
    let mut out = Vec::with_capacity(files.len());
    for (i, _) in files.iter().enumerate() {
        let start = if i == 0 { 0 } else { at(files[i].line) };
        let end = files.get(i + 1).map_or(text.len(), |n| at(n.line));
        out.push(start..end);
    }
    out
}

/// One file split by hunks: the chosen part's patch, the rest's, and the rest's pre-image.
type FileSplit = (Vec<u8>, Vec<u8>, (RelPath, Preimage));

/// The chosen and remaining patches of one text file split by hunks, and the rest's
/// pre-image.
fn split_file(
    f: &FilePatch,
    picked: &[usize],
    base: PreimageReader<'_>,
) -> Result<FileSplit, SelectError> {
    let path = f.path().cloned().ok_or(SelectError::Empty)?;
    let name = path.to_string();
    let what = if f.binary.is_some() {
        Some("binary file")
    } else if f.is_rename {
        Some("renamed file")
    } else if f.is_copy {
        Some("copied file")
    } else {
        None
    };
    if let Some(what) = what {
        return Err(SelectError::NotSplittable { path: name, what });
    }
    // Only modifications have more than one hunk: a creation or deletion has one.
    let old = f.old_path.as_ref().unwrap_or(&path);
    let (base_mode, data) = base(old)?.ok_or_else(|| SelectError::NoPreimage(name.clone()))?;
    let mismatch = || SelectError::PreimageMismatch(name.clone());
    let full = with_hunks(&data, &f.hunks, |_| true).ok_or_else(mismatch)?;
    let mid = with_hunks(&data, &f.hunks, |i| picked.contains(&(i + 1))).ok_or_else(mismatch)?;
    let old_mode = f
        .old_mode
        .unwrap_or(if base_mode == 0 { MODE_FILE } else { base_mode });
    let new_mode = f.new_mode.unwrap_or(old_mode);
    let side = |mode, data| Side {
        path: &path,
        mode,
        data,
    };
    let mut chosen = Vec::new();
    write_file_diff(
        &mut chosen,
        Some(side(old_mode, &data)),
        Some(side(new_mode, &mid)),
    );
    let mut rest = Vec::new();
    write_file_diff(
        &mut rest,
        Some(side(new_mode, &mid)),
        Some(side(new_mode, &full)),
    );
    Ok((chosen, rest, (path.clone(), (new_mode, mid))))
}

/// `base` with the hunks `take` says yes to (by 0-based index), each at its stated old
/// lines; `None` when a hunk's old lines are not there.
fn with_hunks(base: &[u8], hunks: &[Hunk], take: impl Fn(usize) -> bool) -> Option<Vec<u8>> {
    let lines: Vec<&[u8]> = base.split_inclusive(|b| *b == b'\n').collect();
    let mut out = Vec::with_capacity(base.len());
    let mut pos = 0usize;
    for (i, h) in hunks.iter().enumerate() {
        // An empty old side names the line after which it inserts.
        let start = if h.old_len == 0 {
            h.old_start
        } else {
            h.old_start.checked_sub(1)?
        };
        if start < pos || start + h.old_len > lines.len() {
            return None;
        }
        for l in &lines[pos..start] {
            out.extend_from_slice(l);
        }
        let old = &lines[start..start + h.old_len];
        if !old.iter().copied().eq(h.old_lines()) {
            return None;
        }
        if take(i) {
            h.new_lines().for_each(|l| out.extend_from_slice(l));
        } else {
            old.iter().for_each(|l| out.extend_from_slice(l));
        }
        pos = start + h.old_len;
    }
    for l in &lines[pos..] {
        out.extend_from_slice(l);
    }
    Some(out)
}
