//! Relative paths inside a tree (project, base or sandbox).
//!
//! A [`RelPath`] is a path made only of normal components: no root, no `.`, no `..`, not
//! empty. Joining one onto a directory can therefore never leave that directory lexically;
//! the chokepoint in [`crate::fs::state_dir`] adds the symlink checks. Paths are kept as raw bytes on
//! Unix, so non-UTF-8 names survive the round trip into patches.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A validated relative path: only normal components, at least one.
///
/// ```
/// use patchbox::RelPath;
/// assert!(RelPath::new("src/main.rs").is_ok());
/// assert!(RelPath::new("../etc/passwd").is_err());
/// assert!(RelPath::new("/etc/passwd").is_err());
/// assert_eq!(RelPath::new("a/./b").unwrap().as_bytes(), b"a/b");
/// ```
///
/// Its bytes are shared: a clone, and a [`parent`](RelPath::parent) (a prefix of the same
/// bytes), cost no copy, so listing every ancestor of a path thousands of directories deep
/// costs time proportional to the path, not to its length times its depth.
#[derive(Clone)]
pub struct RelPath {
    buf: Arc<[u8]>,
    /// The path is `buf[..len]`.
    len: usize,
}

impl RelPath {
    fn from_normal(b: &[u8]) -> RelPath {
        RelPath {
            buf: Arc::from(b),
            len: b.len(),
        }
    }

    /// The same bytes, cut to their first `len` (a component boundary).
    fn prefix(&self, len: usize) -> RelPath {
        RelPath {
            buf: Arc::clone(&self.buf),
            len,
        }
    }
}

/// Whether `b` is a relative path in normal form: not empty, no empty, `.` or `..`
/// component (so no leading, trailing or doubled `/`). One pass over the bytes: every file
/// a walk finds is checked.
fn is_normal(b: &[u8]) -> bool {
    let mut start = 0;
    for end in memchr::memchr_iter(b'/', b).chain(std::iter::once(b.len())) {
        match &b[start..end] {
            b"" | b"." | b".." => return false,
            _ => start = end + 1,
        }
    }
    true
}

impl RelPath {
    /// Whether both are prefixes of the same bytes (one is an ancestor of the other, or
    /// they are equal): then their order and equality follow from their lengths alone,
    /// without reading bytes both share (a deep path's ancestors compared with each other
    /// would otherwise cost their length each time).
    fn same_bytes(&self, other: &RelPath) -> bool {
        Arc::ptr_eq(&self.buf, &other.buf)
    }
}

impl PartialEq for RelPath {
    fn eq(&self, other: &Self) -> bool {
        if self.same_bytes(other) {
            return self.len == other.len;
        }
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for RelPath {}

impl std::hash::Hash for RelPath {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As the `PathBuf` it replaces hashed: equal paths hash alike whatever their buffer.
        self.as_path().hash(state);
    }
}

impl std::fmt::Debug for RelPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_path(), f)
    }
}

/// `Path`'s order (component by component), computed on the bytes: every `RelPath` is
/// normal (no empty component, no leading or trailing `/`), so at the first byte where two
/// differ, a `/` (a component ended) sorts below any byte a name can hold, which is what
/// comparing the components says. `Path`'s own comparison splits both paths into
/// components each time; it was 3–5% of a `commit_all`'s CPU (the apply's maps of paths).
///
/// Two prefixes of the same bytes compare by length (the shorter is an ancestor, which
/// sorts first); other paths skip their common prefix a block at a time.
impl Ord for RelPath {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self.same_bytes(other) {
            return self.len.cmp(&other.len);
        }
        let (a, b) = (self.as_bytes(), other.as_bytes());
        let key = |c: u8| if c == b'/' { 0 } else { c };
        let i = common_prefix(a, b);
        match (a.get(i), b.get(i)) {
            (Some(&x), Some(&y)) => key(x).cmp(&key(y)),
            _ => a.len().cmp(&b.len()),
        }
    }
}

/// The length of the common prefix of `a` and `b`, compared a block at a time (the
/// compiler turns each block into a few vector comparisons).
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 64 <= n && a[i..i + 64] == b[i..i + 64] {
        i += 64;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

impl PartialOrd for RelPath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl RelPath {
    /// Validates `p`: it must be relative, non-empty and free of `..`.
    /// `.` components are dropped.
    pub fn new(p: impl AsRef<Path>) -> Result<Self> {
        let p = p.as_ref();
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                Component::Normal(s) => out.push(s),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(Error::Containment {
                        path: p.to_path_buf(),
                        base: PathBuf::from("."),
                        reason: "path contains '..'",
                    })
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(Error::Containment {
                        path: p.to_path_buf(),
                        base: PathBuf::from("."),
                        reason: "path is absolute",
                    })
                }
            }
        }
        if out.as_os_str().is_empty() {
            return Err(Error::Containment {
                path: p.to_path_buf(),
                base: PathBuf::from("."),
                reason: "path is empty",
            });
        }
        Ok(RelPath::from_normal(out.as_os_str().as_bytes()))
    }

    /// Builds a `RelPath` from raw bytes with `/` separators (as stored in a git index or a
    /// patch header).
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        // Fast path for the common, already-normal form (one allocation): no empty, `.` or
        // `..` component and no leading or trailing `/`.
        if is_normal(b) {
            return Ok(RelPath::from_normal(b));
        }
        RelPath::new(Path::new(OsStr::from_bytes(b)))
    }

    /// The path as a `Path`.
    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(self.as_bytes()))
    }

    /// The path as raw bytes, `/`-separated.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&self.buf)
    }

    /// Appends one more relative path.
    pub fn join(&self, other: &RelPath) -> RelPath {
        let (a, b) = (self.as_bytes(), other.as_bytes());
        let mut out = Vec::with_capacity(a.len() + 1 + b.len());
        out.extend_from_slice(a);
        out.push(b'/');
        out.extend_from_slice(b);
        RelPath::from_normal(&out)
    }

    /// The parent directory, or `None` for a top-level name. Shares this path's bytes.
    pub fn parent(&self) -> Option<RelPath> {
        let end = memchr::memrchr(b'/', self.as_bytes())?;
        Some(self.prefix(end))
    }
}

impl RelPath {
    /// The components, as bytes, in order.
    pub(crate) fn components_bytes(&self) -> impl Iterator<Item = &[u8]> {
        self.as_bytes()
            .split(|&c| c == b'/')
            .filter(|c| !c.is_empty())
    }

    /// The number of components.
    pub(crate) fn depth(&self) -> usize {
        // A normal path: one more component than separators, counted in a loop the
        // compiler vectorizes (a deep path's ancestors are each measured).
        let b = self.as_bytes();
        if b.is_empty() {
            0
        } else {
            1 + b.iter().filter(|&&c| c == b'/').count()
        }
    }

    /// The depth of this path, given that of `near` (`near_depth`): when both are
    /// prefixes of the same bytes (an ancestor and its descendant, e.g. the next one of a
    /// list of nested directories read from a record) only the separators between their
    /// ends are counted, so measuring every directory of a deep chain in order costs time
    /// proportional to the chain, not to its length times its depth. Otherwise the whole
    /// path is counted.
    pub(crate) fn depth_near(&self, near: &RelPath, near_depth: usize) -> usize {
        if !self.same_bytes(near) {
            return self.depth();
        }
        let slashes = |from: usize, to: usize| {
            self.buf
                .get(from..to)
                .map_or(0, |s| s.iter().filter(|&&c| c == b'/').count())
        };
        if near.len <= self.len {
            near_depth + slashes(near.len, self.len)
        } else {
            near_depth.saturating_sub(slashes(self.len, near.len))
        }
    }

    /// The ancestor (or the path itself) that is its first `len` bytes, sharing its bytes;
    /// `None` when `len` is not the end of one of its components.
    pub(crate) fn prefix_at(&self, len: usize) -> Option<RelPath> {
        let b = self.as_bytes();
        let at_end = len == b.len() || b.get(len) == Some(&b'/');
        (len > 0 && len <= b.len() && at_end).then(|| self.prefix(len))
    }

    /// The ancestor made of the first `n` components (`1 <= n <= depth`), or `None`.
    pub(crate) fn ancestor(&self, n: usize) -> Option<RelPath> {
        let b = self.as_bytes();
        let end = if n == 0 {
            return None;
        } else {
            let mut seen = 0;
            let mut end = None;
            for (i, &c) in b.iter().enumerate() {
                if c == b'/' {
                    seen += 1;
                    if seen == n {
                        end = Some(i);
                        break;
                    }
                }
            }
            match end {
                Some(e) => e,
                None if seen + 1 == n => b.len(),
                None => return None,
            }
        };
        Some(self.prefix(end))
    }

    /// The shallowest proper ancestor for which `f` is true. The ancestors are built in one
    /// buffer, one component at a time, so asking about all of them costs time proportional
    /// to the path (plus what `f` costs), not to its length times its depth.
    pub(crate) fn find_ancestor(&self, mut f: impl FnMut(&RelPath) -> bool) -> Option<RelPath> {
        // Each ancestor is a prefix of these very bytes: nothing is copied.
        let b = self.as_bytes();
        for (i, _) in b.iter().enumerate().filter(|&(_, &c)| c == b'/') {
            let a = self.prefix(i);
            if f(&a) {
                return Some(a);
            }
        }
        None
    }
}

/// A set of [`RelPath`]s kept as a tree of components, so that asking which ancestors of a
/// path are in it costs time proportional to the path, whatever its depth.
#[derive(Clone, Debug)]
pub(crate) struct RelPathSet {
    /// Node 0 is the root (the empty path).
    nodes: Vec<SetNode>,
    len: usize,
}

/// A node of a [`RelPathSet`]: one component below its parent.
#[derive(Clone, Debug, Default)]
struct SetNode {
    member: bool,
    children: std::collections::HashMap<Box<[u8]>, usize>,
}

impl Default for RelPathSet {
    fn default() -> Self {
        RelPathSet {
            nodes: vec![SetNode::default()],
            len: 0,
        }
    }
}

impl RelPathSet {
    /// An empty set.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// True when nothing was inserted.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `p`.
    pub(crate) fn insert(&mut self, p: &RelPath) {
        let mut n = 0;
        for c in p.components_bytes() {
            n = match self.nodes.get(n).and_then(|d| d.children.get(c)) {
                Some(&k) => k,
                None => {
                    let k = self.nodes.len();
                    self.nodes.push(SetNode::default());
                    if let Some(d) = self.nodes.get_mut(n) {
                        d.children.insert(c.into(), k);
                    }
                    k
                }
            };
        }
        if let Some(d) = self.nodes.get_mut(n) {
            if !d.member {
                d.member = true;
                self.len += 1;
            }
        }
    }

    /// For each prefix of `p` (1 component, 2, … all of them), whether it is in the set;
    /// stops early once no longer prefix can be.
    fn walk<'a>(&'a self, p: &'a RelPath) -> impl Iterator<Item = bool> + 'a {
        let mut n = Some(0usize);
        p.components_bytes().map_while(move |c| {
            let k = *self.nodes.get(n?)?.children.get(c)?;
            n = Some(k);
            self.nodes.get(k).map(|d| d.member)
        })
    }

    /// Whether `p` is in the set.
    pub(crate) fn contains(&self, p: &RelPath) -> bool {
        let depth = p.depth();
        self.walk(p).nth(depth.saturating_sub(1)).unwrap_or(false) && depth > 0
    }

    /// The depths (component counts) of the proper ancestors of `p` in the set, shallowest
    /// first.
    pub(crate) fn ancestors_of(&self, p: &RelPath) -> Vec<usize> {
        if self.is_empty() {
            return Vec::new();
        }
        let depth = p.depth();
        self.walk(p)
            .take(depth.saturating_sub(1))
            .enumerate()
            .filter_map(|(i, m)| m.then_some(i + 1))
            .collect()
    }
}

impl AsRef<Path> for RelPath {
    fn as_ref(&self) -> &Path {
        self.as_path()
    }
}

impl std::fmt::Display for RelPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.as_path().display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte order keeps `Path`'s component order, on the names where the two differ
    /// most (`-` and `.` sort below `/` as bytes, above it as components).
    #[test]
    fn order_is_paths_component_order() {
        let names = [
            "a", "a/b", "a-b", "a.b", "a/b/c", "a/b-c", "a/b.c", "a0", "a/0", "ab", "b", "a-",
            "a/-", "a/b/", "Z", "z/a", "\u{e9}", "a/\u{e9}", "a b", "a/ b",
        ];
        let paths: Vec<RelPath> = names.iter().map(|n| RelPath::new(n).unwrap()).collect();
        for x in &paths {
            for y in &paths {
                assert_eq!(x.cmp(y), x.as_path().cmp(y.as_path()), "{x:?} vs {y:?}");
                assert_eq!(x.cmp(y) == std::cmp::Ordering::Equal, x == y);
            }
        }
    }

    #[test]
    fn from_bytes_accepts_normal_and_normalizes_or_refuses_the_rest() {
        assert_eq!(RelPath::from_bytes(b"a/b").unwrap().as_bytes(), b"a/b");
        assert_eq!(RelPath::from_bytes(b"a//b/").unwrap().as_bytes(), b"a/b");
        assert_eq!(RelPath::from_bytes(b"./a").unwrap().as_bytes(), b"a");
        assert_eq!(
            RelPath::from_bytes(b"caf\xc3\xa9\xff").unwrap().as_bytes(),
            b"caf\xc3\xa9\xff"
        );
        for bad in [&b""[..], b".", b"..", b"/a", b"a/../b", b"a/.."] {
            assert!(RelPath::from_bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ancestors_and_sets() {
        let p = RelPath::new("a/b/c/d").unwrap();
        assert_eq!(p.depth(), 4);
        assert_eq!(p.ancestor(1).unwrap().as_bytes(), b"a");
        assert_eq!(p.ancestor(3).unwrap().as_bytes(), b"a/b/c");
        assert_eq!(p.ancestor(4).unwrap(), p);
        assert!(p.ancestor(0).is_none() && p.ancestor(5).is_none());
        let mut seen = Vec::new();
        let found = p.find_ancestor(|a| {
            seen.push(a.to_string());
            a.as_bytes() == b"a/b"
        });
        assert_eq!(found.unwrap().as_bytes(), b"a/b");
        assert_eq!(seen, ["a", "a/b"]);
        assert!(p.find_ancestor(|a| a == &p).is_none());

        let mut set = RelPathSet::new();
        assert!(set.is_empty() && set.ancestors_of(&p).is_empty());
        for m in ["a", "a/b/c", "a/b/c/d", "x/y"] {
            set.insert(&RelPath::new(m).unwrap());
        }
        assert!(set.contains(&p) && set.contains(&RelPath::new("a").unwrap()));
        assert!(!set.contains(&RelPath::new("a/b").unwrap()));
        assert!(!set.contains(&RelPath::new("x").unwrap()));
        assert_eq!(set.ancestors_of(&p), [1, 3]);
        assert_eq!(set.ancestors_of(&RelPath::new("x/y/z").unwrap()), [2]);
        assert!(set.ancestors_of(&RelPath::new("q/a").unwrap()).is_empty());
    }
}
