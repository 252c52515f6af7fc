//! Git's attributes, as far as they decide whether a work-tree file's bytes can differ from
//! its blob: `text` / `crlf` / `eol` end-of-line conversion, `core.autocrlf`, `filter`
//! drivers (LFS, git-crypt, …), `ident` and `working-tree-encoding`.
//!
//! A tracked file whose stat data matches the index is served from the user's object store
//! instead of being copied. That is only right when git stores the file's bytes unchanged;
//! [`Conversions::converts`] says when it may not, and such a file must be read from the work
//! tree.
//!
//! The sources and their precedence are git's (highest first): `$GIT_DIR/info/attributes`,
//! the `.gitattributes` of the file's directory, then of each parent up to the top of the work
//! tree, `core.attributesFile` (default `$XDG_CONFIG_HOME/git/attributes` or
//! `~/.config/git/attributes`), the system file (`/etc/gitattributes`), and the built-in
//! `binary` macro (`[attr]binary -diff -merge -text`). Macros are honoured where git honours
//! them (every source but a `.gitattributes` below the top). Within a file the last matching
//! line wins. Parsing and matching are done by the `gix-attributes` crate (gitoxide), which
//! follows git's `attr.c`; the decision of what counts as a conversion mirrors git's
//! `convert.c` (`convert_attrs`) but errs on the side of "converted": any `filter=<name>` counts
//! whether or not the driver is configured, `text=auto` counts whatever the content, and an
//! attribute file that exists but cannot be read makes every file count.
//!
//! Sources that name no conversion attribute (say only `diff=cpp`) cost nothing per path
//! unless `core.autocrlf` is on. The caller finds the in-tree `.gitattributes` files (the selection walk notices them while
//! listing directories, so a tree without any costs nothing) and hands their contents to
//! [`Conversions::load`], which reads the other sources itself.
//!
//! ```
//! use patchbox::git::attributes::{Conversions, TreeAttrFile};
//! use patchbox::git::repo::GitRepo;
//! let dir = tempfile::tempdir().unwrap();
//! let repo = GitRepo {
//!     git_dir: dir.path().join(".git"),
//!     common_dir: dir.path().join(".git"),
//!     work_tree: dir.path().to_path_buf(),
//!     prefix: None,
//!     index_file: dir.path().join(".git/index"),
//!     excludes_file: None,
//!     ignore_case: false,
//!     attributes_file: None,
//!     system_attributes: None,
//!     autocrlf: false,
//!     promisor: false,
//! };
//! let files = vec![
//!     TreeAttrFile { dir: Vec::new(), data: b"*.txt eol=crlf\n*.png binary\n".to_vec() },
//!     TreeAttrFile { dir: b"raw/".to_vec(), data: b"*.txt -text\n".to_vec() },
//! ];
//! let mut conv = Conversions::load(&repo, files).unwrap();
//! assert!(conv.converts(b"notes.txt"));
//! assert!(conv.converts(b"docs/a.txt"));
//! assert!(!conv.converts(b"raw/a.txt")); // -text wins over the eol set above
//! assert!(!conv.converts(b"logo.png"));
//! assert!(!conv.converts(b"main.rs"));
//! ```

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use gix_attributes::glob::pattern::Case;
use gix_attributes::search::{MetadataCollection, Outcome};
use gix_attributes::{Search, StateRef};

use crate::error::{Error, Result};
use crate::git::repo::GitRepo;

/// The attributes [`Conversions::converts`] looks at.
const CONVERSION_ATTRS: [&str; 6] = [
    "text",
    "crlf",
    "eol",
    "filter",
    "ident",
    "working-tree-encoding",
];

/// The contents of one in-tree `.gitattributes` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeAttrFile {
    /// The directory holding it, relative to the top of the work tree, with a trailing `/`
    /// (empty for the top).
    pub dir: Vec<u8>,
    /// The file's bytes.
    pub data: Vec<u8>,
}

/// Reads an in-tree `.gitattributes` the way git does: a symlink is not followed (it counts as
/// absent, as does a missing file or a directory). `Ok(None)` when absent.
///
/// Errors: the file exists but cannot be read.
pub fn read_tree_attr_file(path: &Path) -> Result<Option<Vec<u8>>> {
    let mut f = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if absent(&e) => return Ok(None),
        Err(e) => return Err(Error::io("open attributes file", path, e)),
    };
    let mut data = Vec::new();
    match f.read_to_end(&mut data) {
        Ok(_) => Ok(Some(data)),
        Err(e) if e.kind() == io::ErrorKind::IsADirectory => Ok(None),
        Err(e) => Err(Error::io("read attributes file", path, e)),
    }
}

/// Missing, a directory, a symlink refused by `O_NOFOLLOW`, or a path through a non-directory.
fn absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::IsADirectory | io::ErrorKind::NotADirectory
    ) || e.raw_os_error() == Some(libc::ELOOP)
}

/// Answers, per work-tree path, whether git converts the file's content between the work tree
/// and the object store (see the module documentation).
///
/// Each directory holding a `.gitattributes` gets its own search stack (the global sources,
/// its file and those of the directories above it, `info/attributes`), built once at load;
/// a path is matched against the stack of its deepest such directory only, so the cost per
/// path does not grow with the number of attribute files in the tree.
pub struct Conversions {
    /// Work-tree-relative directory (trailing `/`; `""` for the top, always present when any
    /// source has lines) → its stack. Empty when no source has lines: only `core.autocrlf`
    /// matters then.
    chains: HashMap<Vec<u8>, Search>,
    out: Outcome,
    case: Case,
    autocrlf: bool,
    /// An attribute file could not be read: every file counts as converted.
    all: bool,
}

impl std::fmt::Debug for Conversions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversions")
            .field("stacks", &self.chains.len())
            .field("autocrlf", &self.autocrlf)
            .field("all", &self.all)
            .finish()
    }
}

/// Reads a global or `info/` attributes file (symlinks followed, as git does for these).
/// `Ok(None)` when absent.
fn read_outside_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(d) => Ok(Some(d)),
        Err(e) if absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The directories above `path` (work-tree-relative; a directory with a trailing `/`),
/// deepest first, ending with the top (`""`); nothing for the top itself.
fn parents(dir: &[u8]) -> impl Iterator<Item = &[u8]> {
    let inner = dir.strip_suffix(b"/").unwrap_or(dir);
    let slashes = inner
        .iter()
        .enumerate()
        .rev()
        .filter(|&(_, &b)| b == b'/')
        .map(|(i, _)| i + 1);
    slashes
        .chain(std::iter::once(0))
        .filter(move |_| !dir.is_empty())
        .map(move |end| &dir[..end])
}

impl Conversions {
    /// Loads the attribute stack of `repo`: the system file, the global file, the given
    /// in-tree files (any order; each applies to its directory and below; of two for the same
    /// directory the first is kept), and `info/attributes`. A source that exists but cannot
    /// be read is not an error: every path then counts as converted (copying a file is always
    /// safe, trusting its blob is not).
    ///
    /// Errors: a `.gitattributes` path that cannot be expressed as git path bytes (not on
    /// Unix in practice).
    pub fn load(repo: &GitRepo, mut tree_files: Vec<TreeAttrFile>) -> Result<Conversions> {
        let mut all = false;
        let mut outside = |path: &Path| match read_outside_file(path) {
            Ok(d) => d.map(|d| (path.to_path_buf(), d)),
            Err(_) => {
                all = true;
                None
            }
        };
        // Lowest precedence first: the system file, the global file.
        let globals: Vec<(PathBuf, Vec<u8>)> = [&repo.system_attributes, &repo.attributes_file]
            .into_iter()
            .flatten()
            .filter_map(|p| outside(p))
            .collect();
        let info = outside(&repo.common_dir.join("info").join("attributes"));
        tree_files.sort_by(|a, b| a.dir.cmp(&b.dir));
        tree_files.dedup_by(|b, a| a.dir == b.dir);
        let case = if repo.ignore_case {
            Case::Fold
        } else {
            Case::Sensitive
        };
        let mut conv = Conversions {
            chains: HashMap::new(),
            out: Outcome::default(),
            case,
            autocrlf: repo.autocrlf,
            all,
        };
        // Nothing to match when no source names a conversion attribute (macros included: a
        // macro that sets one names it in its definition). The built-in `binary` macro only
        // turns conversion off, which matters under core.autocrlf alone.
        let mentions = |d: &[u8]| {
            CONVERSION_ATTRS
                .iter()
                .any(|n| memchr::memmem::find(d, n.as_bytes()).is_some())
        };
        let sources = globals
            .iter()
            .map(|(_, d)| d)
            .chain(info.iter().map(|(_, d)| d))
            .chain(tree_files.iter().map(|f| &f.data));
        let relevant = if repo.autocrlf {
            sources.count() > 0
        } else {
            sources.into_iter().any(|d| mentions(d))
        };
        if !relevant {
            return Ok(conv);
        }

        // Each file's chain: its nearest ancestor's chain plus itself (parents sort first).
        let mut chain_of: HashMap<&[u8], Vec<usize>> = HashMap::new();
        chain_of.insert(b"", Vec::new());
        for (i, f) in tree_files.iter().enumerate() {
            let mut chain = parents(&f.dir)
                .find_map(|p| chain_of.get(p))
                .cloned()
                .unwrap_or_default();
            chain.push(i);
            chain_of.insert(&f.dir, chain);
        }
        let wrap = |path: &Path, e: io::Error| Error::io("load attributes file", path, e);
        let mut collection = MetadataCollection::default();
        let mut buf = Vec::new();
        for (dir, chain) in &chain_of {
            // The built-in `binary` macro comes first.
            let mut search =
                Search::new_globals(std::iter::empty::<PathBuf>(), &mut buf, &mut collection)
                    .map_err(|e| wrap(Path::new("[builtin]"), e))?;
            for (path, data) in &globals {
                search
                    .add_patterns_buffer(data, path.clone(), None, &mut collection, true)
                    .map_err(|e| wrap(path, e))?;
            }
            // Top first: the deepest file is searched first.
            for &i in chain {
                let f = &tree_files[i];
                let source = repo
                    .work_tree
                    .join(std::ffi::OsStr::from_bytes(&f.dir))
                    .join(".gitattributes");
                // Macros are only honoured at the top of the work tree (git warns elsewhere).
                search
                    .add_patterns_buffer(
                        &f.data,
                        source.clone(),
                        Some(&repo.work_tree),
                        &mut collection,
                        f.dir.is_empty(),
                    )
                    .map_err(|e| wrap(&source, e))?;
            }
            // `info/attributes` has the highest precedence: searched first.
            if let Some((path, data)) = &info {
                search
                    .add_patterns_buffer(data, path.clone(), None, &mut collection, true)
                    .map_err(|e| wrap(path, e))?;
            }
            conv.chains.insert(dir.to_vec(), search);
        }
        conv.out
            .initialize_with_selection(&collection, CONVERSION_ATTRS);
        Ok(conv)
    }

    /// A stack under which every file counts as converted: what to use when the attribute
    /// files cannot be read.
    pub fn everything() -> Conversions {
        Conversions {
            chains: HashMap::new(),
            out: Outcome::default(),
            case: Case::Sensitive,
            autocrlf: true,
            all: true,
        }
    }

    /// Whether any path can be converted at all (false: no attribute lines, no
    /// `core.autocrlf`; [`converts`](Self::converts) is then always false).
    pub fn any(&self) -> bool {
        self.all || self.autocrlf || !self.chains.is_empty()
    }

    /// Whether git converts the content of the regular file at `path` (relative to the top of
    /// the work tree, `/`-separated) on its way into or out of the object store, so that the
    /// work-tree bytes may differ from the blob.
    pub fn converts(&mut self, path: &[u8]) -> bool {
        if self.all {
            return true;
        }
        if self.chains.is_empty() {
            return self.autocrlf;
        }
        // The stack of the deepest directory above `path` with a `.gitattributes`.
        let Some(search) = parents(path)
            .find_map(|d| self.chains.get(d))
            .or_else(|| self.chains.get(&b""[..]))
        else {
            return self.autocrlf;
        };
        let out = &mut self.out;
        out.reset();
        search.pattern_matching_relative_path(path.into(), self.case, Some(false), out);
        let (mut text, mut crlf, mut eol) = (None, None, None);
        for m in out.iter_selected() {
            let state = m.assignment.state;
            match m.assignment.name.as_str() {
                "text" => text = crlf_action(state),
                "crlf" => crlf = crlf_action(state),
                "eol" => {
                    eol = match state {
                        StateRef::Value(v) => matches!(bytes(v), b"lf" | b"crlf").then_some(()),
                        _ => None,
                    }
                }
                // git's `git_path_check_convert`: only a named driver counts (whether or not
                // it is configured: a missing `required` driver fails, others are skipped —
                // treat every one as converting).
                "filter" if matches!(state, StateRef::Value(_)) => return true,
                "ident" if matches!(state, StateRef::Set) => return true,
                "working-tree-encoding" => {
                    if let StateRef::Value(v) = state {
                        if !bytes(v).is_empty() {
                            return true;
                        }
                    }
                }
                _ => {}
            }
        }
        // git's `convert_attrs`: `text` decides, else the legacy `crlf`; `-text` (binary)
        // turns end-of-line conversion off whatever `eol` or `core.autocrlf` say.
        match text.or(crlf) {
            Some(CrlfAction::Binary) => false,
            Some(CrlfAction::Convert) => true,
            None => eol.is_some() || self.autocrlf,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CrlfAction {
    /// `-text`: stored as is.
    Binary,
    /// `text`, `text=auto`, `text=input`: end-of-line conversion.
    Convert,
}

fn bytes(v: gix_attributes::state::ValueRef<'_>) -> &[u8] {
    v.as_bstr()
}

/// git's `git_path_check_crlf`; other values are "undefined".
fn crlf_action(state: StateRef<'_>) -> Option<CrlfAction> {
    match state {
        StateRef::Set => Some(CrlfAction::Convert),
        StateRef::Unset => Some(CrlfAction::Binary),
        StateRef::Value(v) if matches!(bytes(v), b"input" | b"auto") => Some(CrlfAction::Convert),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(dir: &Path) -> GitRepo {
        GitRepo {
            git_dir: dir.join(".git"),
            common_dir: dir.join(".git"),
            work_tree: dir.to_path_buf(),
            prefix: None,
            index_file: dir.join(".git/index"),
            excludes_file: None,
            ignore_case: false,
            attributes_file: None,
            system_attributes: None,
            autocrlf: false,
            promisor: false,
        }
    }

    fn top(data: &str) -> TreeAttrFile {
        TreeAttrFile {
            dir: Vec::new(),
            data: data.as_bytes().to_vec(),
        }
    }

    #[test]
    fn sources_without_conversion_attributes_are_not_matched() {
        let d = tempfile::tempdir().unwrap();
        let mut r = repo(d.path());
        let files = || vec![top("*.c diff=cpp\n*.png binary\n")];
        let mut c = Conversions::load(&r, files()).unwrap();
        assert!(!c.any() && !c.converts(b"a.c"));
        r.autocrlf = true;
        let mut c = Conversions::load(&r, files()).unwrap();
        assert!(c.converts(b"a.c") && !c.converts(b"a.png"));
    }

    #[test]
    fn parents_of_paths() {
        let p = |s: &str| {
            parents(s.as_bytes())
                .map(|d| String::from_utf8_lossy(d).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(p("a/b/"), ["a/", ""]);
        assert_eq!(p("a/b/c"), ["a/b/", "a/", ""]);
        assert_eq!(p("x"), [""]);
        assert!(p("").is_empty());
    }

    #[test]
    fn conversion_rules() {
        let d = tempfile::tempdir().unwrap();
        let r = repo(d.path());
        let mut c = Conversions::load(
            &r,
            vec![top(
                "*.a text\n*.b text=auto\n*.c crlf\n*.d -crlf\n*.e eol=lf\n*.f eol=weird\n\
                 *.g filter=lfs -text\n*.h ident\n*.i -ident\n*.j working-tree-encoding=UTF-16\n\
                 *.k binary\n*.l -text eol=crlf\n*.m text=bogus\n*.n crlf=input\n\
                 [attr]conv text\n*.o conv\n*.p filter\n",
            )],
        )
        .unwrap();
        for (p, want) in [
            ("x.a", true),
            ("x.b", true),
            ("x.c", true),
            ("x.d", false),
            ("x.e", true),
            ("x.f", false),
            ("x.g", true),
            ("x.h", true),
            ("x.i", false),
            ("x.j", true),
            ("x.k", false),
            ("x.l", false),
            ("x.m", false),
            ("x.n", true),
            ("x.o", true),
            ("x.p", false),
            ("x.z", false),
        ] {
            assert_eq!(c.converts(p.as_bytes()), want, "{p}");
        }
        let mut r = r;
        r.autocrlf = true;
        let mut c = Conversions::load(&r, vec![top("*.k binary\n*.m text=bogus\n")]).unwrap();
        assert!(c.converts(b"x.z"));
        assert!(c.converts(b"x.m"));
        assert!(!c.converts(b"x.k"));
        let mut c = Conversions::load(&r, Vec::new()).unwrap();
        assert!(c.any() && c.converts(b"anything"));
    }

    #[test]
    fn precedence_and_macros() {
        let d = tempfile::tempdir().unwrap();
        let mut r = repo(d.path());
        fs::create_dir_all(d.path().join(".git/info")).unwrap();
        fs::write(
            d.path().join("global"),
            "[attr]crypt filter=crypt -text\n*.g text\n",
        )
        .unwrap();
        r.attributes_file = Some(d.path().join("global"));
        fs::write(d.path().join(".git/info/attributes"), "*.i -text\n").unwrap();
        let files = vec![
            TreeAttrFile {
                dir: b"sub/deep/".to_vec(),
                data: b"*.t -text\n[attr]mine text\n*.m mine\n".to_vec(),
            },
            top("*.t text\n*.s crypt\n*.i text\n*.g -text\n"),
            TreeAttrFile {
                dir: b"sub/".to_vec(),
                data: b"*.t text\n".to_vec(),
            },
        ];
        let mut c = Conversions::load(&r, files).unwrap();
        assert!(c.converts(b"a.t"));
        assert!(c.converts(b"sub/a.t"));
        assert!(!c.converts(b"sub/deep/a.t"), "deeper file wins");
        assert!(!c.converts(b"sub/deep/x/a.t"));
        assert!(c.converts(b"sub/x/a.t"));
        assert!(c.converts(b"sub/deep/a.s"), "global macro used in the tree");
        assert!(!c.converts(b"a.i"), "info/attributes wins");
        assert!(!c.converts(b"a.g"), "in-tree wins over global");
        assert!(
            !c.converts(b"sub/deep/a.m"),
            "macros below the top are ignored"
        );
        assert!(!c.converts(b"subx/a.m"));
    }

    #[test]
    fn unreadable_source_converts_everything_and_symlinks_are_absent() {
        let d = tempfile::tempdir().unwrap();
        let mut r = repo(d.path());
        // A directory where the global file should be: absent, as in git.
        fs::create_dir(d.path().join("g")).unwrap();
        r.attributes_file = Some(d.path().join("g"));
        let mut c = Conversions::load(&r, Vec::new()).unwrap();
        assert!(!c.any() && !c.converts(b"x"));
        std::os::unix::fs::symlink("elsewhere", d.path().join(".gitattributes")).unwrap();
        assert_eq!(
            read_tree_attr_file(&d.path().join(".gitattributes")).unwrap(),
            None
        );
        assert_eq!(read_tree_attr_file(&d.path().join("nope/x")).unwrap(), None);
        fs::write(d.path().join("real"), "*.x text\n").unwrap();
        assert_eq!(
            read_tree_attr_file(&d.path().join("real")).unwrap(),
            Some(b"*.x text\n".to_vec())
        );
    }
}
