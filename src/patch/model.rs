//! The patch model: what a parsed patch is — one [`FilePatch`] per file with its paths, modes,
//! blob ids and either text [`Hunk`]s or a [`BinaryPatch`] — and git's file modes. Built by
//! [`crate::patch::parse`], read by the apply engine.

use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::git::delta::{self, DeltaError};

/// Mode of a symbolic link in git (`120000`).
pub const MODE_SYMLINK: u32 = 0o120000;
/// Mode of a regular, non-executable file in git (`100644`).
pub const MODE_FILE: u32 = 0o100644;
/// Mode of an executable file in git (`100755`).
pub const MODE_EXECUTABLE: u32 = 0o100755;
/// Mode of a submodule (gitlink) entry in git (`160000`).
pub const MODE_GITLINK: u32 = 0o160000;

/// Largest inflated size a binary hunk may declare (1 GiB).
pub(crate) const MAX_BINARY_SIZE: u64 = 1 << 30;

/// A parsed patch: the file patches in input order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Patch {
    /// One entry per `diff --git` (or `---`/`+++`) section.
    pub files: Vec<FilePatch>,
}

impl Patch {
    /// Every path the patch reads or writes (old and new names), in order, without repeats.
    ///
    /// ```
    /// use patchbox::patch::parse::parse_patch;
    /// let p = parse_patch(b"diff --git a/old b/new\nsimilarity index 100%\nrename from old\nrename to new\n").unwrap();
    /// let names: Vec<_> = p.paths().iter().map(|p| p.to_string()).collect();
    /// assert_eq!(names, ["old", "new"]);
    /// ```
    pub fn paths(&self) -> Vec<&RelPath> {
        let mut out: Vec<&RelPath> = Vec::new();
        for f in &self.files {
            for p in [f.old_path.as_ref(), f.new_path.as_ref()]
                .into_iter()
                .flatten()
            {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }
}

/// The changes to one file.
///
/// `old_path` is `None` for a created file and `new_path` is `None` for a deleted one; both are
/// set (and usually equal) otherwise. Modes are git modes (`0o100644`, `0o100755`, `0o120000`,
/// `0o160000`); `None` when the patch does not say. Blob ids are the hex strings of the `index`
/// line, possibly abbreviated.
///
/// ```
/// use patchbox::patch::parse::parse_patch;
/// let p = parse_patch(b"diff --git a/run.sh b/bin/run.sh\nold mode 100644\nnew mode 100755\n\
/// similarity index 100%\nrename from run.sh\nrename to bin/run.sh\n").unwrap();
/// let f = &p.files[0];
/// assert!(f.is_rename && !f.is_creation() && !f.is_deletion());
/// assert_eq!(f.path().unwrap().to_string(), "bin/run.sh");
/// assert_eq!((f.old_mode, f.new_mode), (Some(0o100644), Some(0o100755)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePatch {
    /// Path before the change; `None` when the file is created.
    pub old_path: Option<RelPath>,
    /// Path after the change; `None` when the file is deleted.
    pub new_path: Option<RelPath>,
    /// Git mode before the change, if known.
    pub old_mode: Option<u32>,
    /// Git mode after the change, if known.
    pub new_mode: Option<u32>,
    /// Whether `new_mode` comes from an explicit `new mode` line (as opposed to the `index`
    /// line's mode or the old mode). git gives the file an explicit new mode even when it
    /// equals the old one and the file's own exec bit differs; otherwise the file keeps its
    /// own permissions (git's `check_preimage`).
    pub new_mode_line: bool,
    /// Blob id before the change (from the `index` line), if given.
    pub old_oid: Option<String>,
    /// Blob id after the change (from the `index` line), if given.
    pub new_oid: Option<String>,
    /// `rename from`/`rename to`: the old path disappears.
    pub is_rename: bool,
    /// `copy from`/`copy to`: the old path stays.
    pub is_copy: bool,
    /// `similarity index` percentage, if given.
    pub similarity: Option<u32>,
    /// Whether the section had a `diff --git` header (as opposed to a traditional diff).
    pub is_git: bool,
    /// Text hunks, in order. Empty for binary changes and pure renames or mode changes.
    pub hunks: Vec<Hunk>,
    /// The binary change, for `GIT binary patch` or `Binary files … differ` sections.
    pub binary: Option<BinaryPatch>,
    /// 1-based line number of the section's first header line.
    pub line: usize,
}

impl FilePatch {
    /// The path this patch is about: the new path, or the old one for a deletion. Always
    /// `Some` for file patches made by the parser.
    pub fn path(&self) -> Option<&RelPath> {
        self.new_path.as_ref().or(self.old_path.as_ref())
    }

    /// True when the file is created by the patch.
    pub fn is_creation(&self) -> bool {
        self.old_path.is_none()
    }

    /// True when the file is deleted by the patch.
    pub fn is_deletion(&self) -> bool {
        self.new_path.is_none()
    }
}

/// One `@@ -old_start,old_len +new_start,new_len @@` hunk.
///
/// ```
/// use patchbox::patch::parse::parse_patch;
/// let p = parse_patch(b"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n").unwrap();
/// let h = &p.files[0].hunks[0];
/// assert_eq!(h.header(), "@@ -1,2 +1,2 @@");
/// assert_eq!(h.old_lines().collect::<Vec<_>>(), [&b"a\n"[..], b"b\n"]);
/// assert_eq!(h.new_lines().collect::<Vec<_>>(), [&b"a\n"[..], b"c"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// First line of the old range (1-based; 0 with `old_len == 0` means "before line 1").
    pub old_start: usize,
    /// Number of old lines (context plus deleted).
    pub old_len: usize,
    /// First line of the new range.
    pub new_start: usize,
    /// Number of new lines (context plus inserted).
    pub new_len: usize,
    /// Text after the closing `@@` (the function name git shows), without the newline.
    pub section: Vec<u8>,
    /// The lines, in order.
    pub lines: Vec<HunkLine>,
    /// 1-based line number of the `@@` header in the patch text.
    pub line: usize,
}

impl Hunk {
    /// The `@@ -a,b +c,d @@` header as text (without the section heading).
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_len, self.new_start, self.new_len
        )
    }

    /// The old side of the hunk (context and deleted lines), each with its newline if it has one.
    pub fn old_lines(&self) -> impl Iterator<Item = &[u8]> {
        self.lines
            .iter()
            .filter(|l| l.kind != LineKind::Insert)
            .map(|l| l.text.as_slice())
    }

    /// The new side of the hunk (context and inserted lines).
    pub fn new_lines(&self) -> impl Iterator<Item = &[u8]> {
        self.lines
            .iter()
            .filter(|l| l.kind != LineKind::Delete)
            .map(|l| l.text.as_slice())
    }
}

/// What a hunk line does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// ` ` unchanged line.
    Context,
    /// `-` line removed.
    Delete,
    /// `+` line added.
    Insert,
}

/// One line of a hunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HunkLine {
    /// Context, deleted or inserted.
    pub kind: LineKind,
    /// The line's bytes including its trailing `\n`, which is absent when the patch marks the
    /// line with `\ No newline at end of file`.
    pub text: Vec<u8>,
}

/// A binary change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BinaryPatch {
    /// `Binary files a/x and b/x differ`: the patch says the file changed but carries no data
    /// (made without `--binary`). It cannot be applied.
    NoData,
    /// `GIT binary patch` with a forward hunk and, usually, a reverse hunk.
    Data {
        /// Turns the old contents into the new.
        forward: BinaryHunk,
        /// Turns the new contents back into the old, if present.
        reverse: Option<BinaryHunk>,
    },
}

/// One `literal <size>` or `delta <size>` block, decoded and inflated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryHunk {
    /// Literal contents or a git delta.
    pub kind: BinaryKind,
    /// The inflated bytes: the file contents for a literal, the delta instructions for a delta.
    pub data: Vec<u8>,
}

/// Kind of a [`BinaryHunk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryKind {
    /// The complete contents.
    Literal,
    /// A git delta against the other side's contents (see [`apply_delta`]).
    Delta,
}

impl BinaryHunk {
    /// The resulting contents when this hunk is applied to `base`.
    ///
    /// ```
    /// use patchbox::patch::model::{BinaryHunk, BinaryKind};
    /// let lit = BinaryHunk { kind: BinaryKind::Literal, data: b"new".to_vec() };
    /// assert_eq!(lit.apply(b"old").unwrap(), b"new");
    /// ```
    pub fn apply(&self, base: &[u8]) -> Result<Vec<u8>> {
        match self.kind {
            BinaryKind::Literal => Ok(self.data.clone()),
            BinaryKind::Delta => apply_delta(base, &self.data),
        }
    }
}

/// True for a symlink mode (`120000`).
///
/// ```
/// use patchbox::patch::model::{mode_is_executable, mode_is_gitlink, mode_is_symlink};
/// assert!(mode_is_symlink(0o120000) && !mode_is_symlink(0o100644));
/// assert!(mode_is_executable(0o100755) && !mode_is_executable(0o100644));
/// assert!(mode_is_gitlink(0o160000) && !mode_is_gitlink(0o120000));
/// ```
pub fn mode_is_symlink(mode: u32) -> bool {
    mode & 0o170000 == 0o120000
}

/// True for a gitlink (submodule) mode (`160000`).
pub fn mode_is_gitlink(mode: u32) -> bool {
    mode & 0o170000 == 0o160000
}

/// True for a regular file mode git treats as executable (`100755`): the owner's execute bit
/// decides, as in git's `canon_mode` (a mangled `100614` is a plain file, `100700` is
/// executable).
pub fn mode_is_executable(mode: u32) -> bool {
    mode & 0o170000 == 0o100000 && mode & 0o100 != 0
}

/// Applies a git binary delta (as found in `delta <size>` hunks) to `base`.
///
/// The decoding is [`crate::git::delta::apply`]'s; here a result is limited to 1 GiB and any
/// inconsistency is an [`Error::ApplyFailed`].
///
/// ```
/// use patchbox::patch::model::apply_delta;
/// // base size 5, result size 8; copy 5 bytes from offset 0; insert "!!!".
/// let delta = [5u8, 8, 0x80 | 0x10, 5, 3, b'!', b'!', b'!'];
/// assert_eq!(apply_delta(b"hello", &delta).unwrap(), b"hello!!!");
/// assert!(apply_delta(b"hell", &delta).is_err());
/// ```
pub fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>> {
    delta::apply(base, delta, MAX_BINARY_SIZE).map_err(|e| match e {
        DeltaError::BaseSize { expected, actual } => Error::ApplyFailed(format!(
            "binary delta expects a {expected}-byte original, the file has {actual} bytes"
        )),
        DeltaError::Corrupt(why) => Error::ApplyFailed(format!("corrupt binary delta: {why}")),
    })
}
