//! Git's exclude rules: `.gitignore` in every directory (deeper files win, last matching line
//! wins within a file, `!` negations, anchors, `**`, dir-only patterns), then
//! `$GIT_COMMON_DIR/info/exclude`, then `core.excludesFile` (or its XDG default).
//!
//! The patterns themselves are compiled by the `ignore` crate's [`GitignoreBuilder`]; the
//! precedence between sources is done here. Lines that are not UTF-8 are dropped (globs are
//! `str`); a backslash inside a bracket expression is taken literally; `core.ignoreCase`
//! applies to patterns only. [`IgnoreRules`] answers for paths in a copy of the project; the
//! selection walk (`tree::walk`) uses the lower-level pieces to prune as it descends.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

use crate::error::Result;
use crate::fs::relpath::RelPath;
use crate::git::repo::GitRepo;

/// Rewrites one gitignore line so that globset reads it as git's wildmatch would: braces are
/// literal in git (globset treats `{a,b}` as alternation). `None` for lines that are not UTF-8
/// (globset patterns are `str`; such lines are dropped).
fn translate_line(line: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(line).ok()?;
    if !s.contains(['{', '}']) {
        return Some(s.to_string());
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    out.push(n);
                    i += 1;
                }
            }
            '[' => {
                // Copy a bracket expression verbatim if it is closed.
                let mut j = i + 1;
                if matches!(chars.get(j), Some('!') | Some('^')) {
                    j += 1;
                }
                if chars.get(j) == Some(&']') {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j < chars.len() {
                    out.extend(&chars[i..=j]);
                    i = j;
                } else {
                    out.push('[');
                }
            }
            '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    Some(out)
}

/// Builds a matcher from gitignore text. Paths are matched relative to the file's directory.
fn build_gitignore(data: &[u8], ignore_case: bool) -> Option<Gitignore> {
    let data = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
    let mut b = GitignoreBuilder::new("");
    // Never fails (the Result is historical).
    let _ = b.case_insensitive(ignore_case);
    let mut any = false;
    for line in data.split(|&c| c == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        if let Some(l) = translate_line(line) {
            // An invalid glob (e.g. a reversed range) never matches in git either: drop it.
            if b.add_line(None, &l).is_ok() {
                any = true;
            }
        }
    }
    if !any {
        return None;
    }
    b.build().ok().filter(|g| !g.is_empty())
}

/// Reads a gitignore file; `nofollow` refuses symlinks (git does for in-tree `.gitignore`).
pub(crate) fn load_gitignore_file(
    path: &Path,
    nofollow: bool,
    ignore_case: bool,
) -> Option<Gitignore> {
    let mut o = fs::OpenOptions::new();
    o.read(true);
    if nofollow {
        o.custom_flags(libc::O_NOFOLLOW);
    }
    let mut f = o.open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut data = Vec::new();
    f.read_to_end(&mut data).ok()?;
    build_gitignore(&data, ignore_case)
}

/// The repository-wide exclude sources, lowest precedence: `info/exclude`, then the global
/// excludes file. Both match paths relative to the work tree.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    info_exclude: Option<Gitignore>,
    global: Option<Gitignore>,
}

impl Rules {
    pub(crate) fn load(repo: &GitRepo) -> Result<Rules> {
        Ok(Rules {
            info_exclude: load_gitignore_file(
                &repo.common_dir.join("info").join("exclude"),
                false,
                repo.ignore_case,
            ),
            global: repo
                .excludes_file
                .as_deref()
                .and_then(|p| load_gitignore_file(p, false, repo.ignore_case)),
        })
    }
}

pub(crate) fn as_path(b: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(b))
}

/// One per-directory `.gitignore`, linked to its parent directory's level.
#[derive(Debug)]
pub(crate) struct Level {
    pub(crate) gi: Gitignore,
    /// Length of the directory's work-tree-relative prefix (with its trailing `/`).
    pub(crate) base: usize,
    pub(crate) parent: Option<Arc<Level>>,
}

fn decide(m: Match<&ignore::gitignore::Glob>) -> Option<bool> {
    match m {
        Match::None => None,
        Match::Ignore(_) => Some(true),
        Match::Whitelist(_) => Some(false),
    }
}

/// Git's `last_matching_pattern`: per-directory files from the deepest up, then info/exclude,
/// then the global file; the first source with a matching line decides.
pub(crate) fn excluded_by<'a>(
    levels: impl Iterator<Item = (&'a Gitignore, usize)>,
    rules: &Rules,
    path: &[u8],
    is_dir: bool,
) -> bool {
    for (gi, base) in levels {
        if let Some(d) = path
            .get(base..)
            .and_then(|p| decide(gi.matched(as_path(p), is_dir)))
        {
            return d;
        }
    }
    for gi in [&rules.info_exclude, &rules.global].into_iter().flatten() {
        if let Some(d) = decide(gi.matched(as_path(path), is_dir)) {
            return d;
        }
    }
    false
}

pub(crate) fn chain_iter(
    mut cur: Option<&Arc<Level>>,
) -> impl Iterator<Item = (&Gitignore, usize)> {
    std::iter::from_fn(move || {
        let l = cur?;
        cur = l.parent.as_ref();
        Some((&l.gi, l.base))
    })
}

pub(crate) fn is_dot_git(name: &[u8], ignore_case: bool) -> bool {
    if ignore_case {
        name.eq_ignore_ascii_case(b".git")
    } else {
        name == b".git"
    }
}

/// Ignore rules for new files appearing in a copy of the project (a sandbox): `.gitignore`
/// files read from `tree_root` (the copy) for the project's own directories, from the real work
/// tree for the directories above the project, plus `info/exclude` and `core.excludesFile` of
/// the project's repository.
///
/// `.gitignore` files are read lazily, once per directory; build a new `IgnoreRules` to see
/// later edits. Outside git nothing is ignored except paths inside a `.git` directory.
///
/// ```
/// use patchbox::git::ignore::IgnoreRules;
/// use patchbox::RelPath;
/// let dir = tempfile::tempdir().unwrap();
/// let rules = IgnoreRules::load(dir.path(), None).unwrap();
/// assert!(!rules.is_ignored(&RelPath::new("a.o").unwrap(), false));
/// assert!(rules.is_ignored(&RelPath::new(".git/config").unwrap(), false));
/// ```
#[derive(Debug)]
pub struct IgnoreRules {
    git: bool,
    tree_root: PathBuf,
    work_tree: PathBuf,
    /// The project's work-tree-relative prefix with trailing `/`, or empty.
    prefix: Vec<u8>,
    ignore_case: bool,
    rules: Rules,
    /// Per-directory matchers, keyed by work-tree-relative dir prefix (`""`, `"a/"`, …).
    cache: RwLock<HashMap<Vec<u8>, Option<Arc<Gitignore>>>>,
}

impl IgnoreRules {
    /// Loads the rules for a copy of the project rooted at `tree_root`. The project's place in
    /// the repository is `repo.prefix`; `None` for `repo` means not a git project.
    pub fn load(tree_root: &Path, repo: Option<&GitRepo>) -> Result<IgnoreRules> {
        Self::load_with_prefix(tree_root, repo, repo.and_then(|r| r.prefix.as_ref()))
    }

    /// Like [`IgnoreRules::load`] with an explicit project prefix (the project directory
    /// relative to the work tree, `None` for the top).
    ///
    /// ```
    /// use patchbox::git::{ignore::IgnoreRules, repo::GitRepo};
    /// use patchbox::RelPath;
    /// let wt = tempfile::tempdir().unwrap();
    /// let copy = tempfile::tempdir().unwrap();
    /// std::fs::create_dir(wt.path().join("sub")).unwrap();
    /// std::fs::write(wt.path().join(".gitignore"), "*.o\n/top-only\n").unwrap();
    /// std::fs::write(copy.path().join(".gitignore"), "!keep.o\n").unwrap();
    /// let repo = GitRepo {
    ///     git_dir: wt.path().join(".git"),
    ///     common_dir: wt.path().join(".git"),
    ///     work_tree: wt.path().to_path_buf(),
    ///     prefix: None,
    ///     index_file: wt.path().join(".git/index"),
    ///     excludes_file: None,
    ///     ignore_case: false,
    ///     attributes_file: None,
    ///     system_attributes: None,
    ///     autocrlf: false,
    ///     promisor: false,
    /// };
    /// let sub = RelPath::new("sub").unwrap();
    /// let rules = IgnoreRules::load_with_prefix(copy.path(), Some(&repo), Some(&sub)).unwrap();
    /// assert!(rules.is_ignored(&RelPath::new("x/a.o").unwrap(), false));
    /// assert!(!rules.is_ignored(&RelPath::new("keep.o").unwrap(), false));
    /// assert!(!rules.is_ignored(&RelPath::new("top-only").unwrap(), false));
    /// ```
    pub fn load_with_prefix(
        tree_root: &Path,
        repo: Option<&GitRepo>,
        project_prefix: Option<&RelPath>,
    ) -> Result<IgnoreRules> {
        let Some(repo) = repo else {
            return Ok(IgnoreRules {
                git: false,
                tree_root: tree_root.to_path_buf(),
                work_tree: tree_root.to_path_buf(),
                prefix: Vec::new(),
                ignore_case: false,
                rules: Rules::default(),
                cache: RwLock::new(HashMap::new()),
            });
        };
        let mut prefix = Vec::new();
        if let Some(p) = project_prefix {
            prefix.extend_from_slice(p.as_bytes());
            prefix.push(b'/');
        }
        let mut cache = HashMap::new();
        // Directories above the project: their .gitignore comes from the real work tree.
        for (i, &b) in prefix.iter().enumerate() {
            if i == 0 || b == b'/' {
                let dir = if i == 0 { &prefix[..0] } else { &prefix[..=i] };
                if dir.len() < prefix.len() {
                    let f = repo.work_tree.join(as_path(dir)).join(".gitignore");
                    let gi = load_gitignore_file(&f, true, repo.ignore_case).map(Arc::new);
                    cache.insert(dir.to_vec(), gi);
                }
            }
        }
        Ok(IgnoreRules {
            git: true,
            tree_root: tree_root.to_path_buf(),
            work_tree: repo.work_tree.clone(),
            prefix,
            ignore_case: repo.ignore_case,
            rules: Rules::load(repo)?,
            cache: RwLock::new(cache),
        })
    }

    fn level(&self, dir: &[u8]) -> Option<Arc<Gitignore>> {
        {
            let c = self.cache.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(v) = c.get(dir) {
                return v.clone();
            }
        }
        let file = if dir.len() < self.prefix.len() {
            self.work_tree.join(as_path(dir)).join(".gitignore")
        } else {
            self.tree_root
                .join(as_path(&dir[self.prefix.len()..]))
                .join(".gitignore")
        };
        let gi = load_gitignore_file(&file, true, self.ignore_case).map(Arc::new);
        self.cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dir.to_vec(), gi.clone());
        gi
    }

    /// True if `rel` (relative to the tree root) or any directory above it is excluded by the
    /// rules, i.e. git would not list it as untracked. Paths in a `.git` directory are always
    /// ignored. Whether the path is tracked is not considered.
    pub fn is_ignored(&self, rel: &RelPath, is_dir: bool) -> bool {
        let rb = rel.as_bytes();
        if rb
            .split(|&b| b == b'/')
            .any(|c| is_dot_git(c, self.ignore_case))
        {
            return true;
        }
        if !self.git {
            return false;
        }
        let mut full = self.prefix.clone();
        full.extend_from_slice(rb);
        let mut levels: Vec<(Arc<Gitignore>, usize)> = Vec::new();
        if let Some(g) = self.level(b"") {
            levels.push((g, 0));
        }
        for (i, &b) in full.iter().enumerate() {
            if b != b'/' {
                continue;
            }
            let dir = &full[..i];
            let iter = levels.iter().rev().map(|(g, base)| (&**g, *base));
            if excluded_by(iter, &self.rules, dir, true) {
                return true;
            }
            if let Some(g) = self.level(&full[..=i]) {
                levels.push((g, i + 1));
            }
        }
        let iter = levels.iter().rev().map(|(g, base)| (&**g, *base));
        excluded_by(iter, &self.rules, &full, is_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_are_literal() {
        assert_eq!(translate_line(b"*.{o,a}").as_deref(), Some("*.\\{o,a\\}"));
        assert_eq!(translate_line(b"[{]x").as_deref(), Some("[{]x"));
        assert_eq!(translate_line(b"\\{").as_deref(), Some("\\{"));
        let gi = build_gitignore(b"*.{o,a}\n", false).unwrap();
        assert!(gi.matched(Path::new("x.{o,a}"), false).is_ignore());
        assert!(gi.matched(Path::new("x.o"), false).is_none());
    }
}
