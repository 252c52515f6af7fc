//! The directory descriptors one phase of an apply reuses below the project's root, and the
//! walk from the last path to the next.
//!
//! Why a file of its own: the containment checks of `fs::project` ask one question (where
//! does a walk to this path start, through which held directories), and this cache answers
//! it in time proportional to the path's new components, whatever the depth; how it does
//! that (a cursor, kept descriptors, least-recently-used closing) is its own idea. It
//! opens through the parent's `O_NOFOLLOW` primitives only.

use super::*;
use crate::fs::relpath::common_prefix;

/// Most directory descriptors a scope keeps open: a path thousands of directories deep
/// would otherwise hold one per level, past the usual limit of 1,024 per process. The
/// least recently used are closed first (and opened again from the deepest one still open
/// when needed).
pub(super) const MAX_OPEN: usize = 256;

/// One directory reached in this scope.
struct DirNode {
    /// Its descriptor, while open.
    fd: Option<Rc<OwnedFd>>,
    children: HashMap<Box<[u8]>, usize>,
    /// When it was last used (for closing the least recently used).
    used: u64,
    /// Kept open while the scope lasts (see [`PIN_EVERY`]).
    pinned: bool,
}

/// Every this many levels down a walk (at first), a directory is kept open instead of
/// taking its turn to be closed: going back up a chain deeper than [`MAX_OPEN`] (removing a
/// deep path's directories bottom-up) then reopens only the levels below the nearest kept
/// one, not the whole chain from the root each time. When half of `MAX_OPEN` are kept, the
/// spacing doubles (every other one is let go), so a chain of any depth keeps at most that
/// many, and going up it reopens each level about twice.
const PIN_EVERY: usize = 32;

/// Directory descriptors opened during one phase of an apply (planning, or writing), as a
/// tree of the directories below the root. Each was reached component by component with
/// `O_NOFOLLOW`, so it names a directory that was inside the project when it was opened,
/// and nothing done through it follows a symlink swapped in later. Removing or renaming a
/// directory evicts it and everything below it.
///
/// Finding where a walk can start costs time proportional to the path, never to its length
/// times its depth: the walk before is kept (`cursor`), and a path sharing a prefix with it
/// (the next file in the same directory, the next ancestor of a deep path) starts from
/// there after one comparison of bytes; only the components after the shared prefix are
/// looked up in the tree.
struct DirCache {
    root: PathBuf,
    /// Node 0 is the root (always open).
    nodes: Vec<DirNode>,
    /// Nodes by the time they were used; stale entries (used again since) are skipped.
    lru: VecDeque<(usize, u64)>,
    clock: u64,
    open: usize,
    /// The nodes of the last walk's directories, from the top, and their path's bytes.
    cursor: Vec<usize>,
    cursor_path: Vec<u8>,
    /// A path `cursor_path` is a prefix of (the last one walked), when known: a path that
    /// is a prefix of the same bytes (the next directory up or down a chain) shares all of
    /// the shorter of the two with the cursor, found without comparing bytes; the
    /// directories of a chain thousands deep are then walked in time proportional to the
    /// chain, not to its length times its depth.
    cursor_src: Option<RelPath>,
    /// The last path whose every name was found free of `.git` aliases (see
    /// [`names_checked`]).
    names_passed: Option<RelPath>,
    /// Where each of the cursor's components ends in `cursor_path`.
    cursor_ends: Vec<usize>,
    /// The nodes below the root kept open, with their depth (see [`PIN_EVERY`]).
    pins: Vec<(usize, usize)>,
    /// The current spacing of kept nodes.
    pin_every: usize,
}

thread_local! {
    static CACHE: RefCell<Option<DirCache>> = const { RefCell::new(None) };
}

/// While alive, this thread's helpers reuse directory descriptors below `root`: one
/// `openat` per directory per phase (while at most [`MAX_OPEN`] are open), instead of one
/// per component on every call. Each phase opens its own scope, so the write phase walks
/// the project afresh.
pub(crate) struct DirScope {
    prev: Option<DirCache>,
}

impl DirScope {
    pub(crate) fn enter(root: &Path) -> Result<DirScope> {
        let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
        let cache = DirCache {
            root: root.to_path_buf(),
            nodes: vec![DirNode {
                fd: Some(Rc::new(fd)),
                children: HashMap::new(),
                used: 0,
                pinned: true,
            }],
            lru: VecDeque::new(),
            clock: 0,
            open: 0,
            cursor: Vec::new(),
            cursor_path: Vec::new(),
            cursor_src: None,
            names_passed: None,
            cursor_ends: Vec::new(),
            pins: Vec::new(),
            pin_every: PIN_EVERY,
        };
        let prev = CACHE.with(|c| c.borrow_mut().replace(cache));
        Ok(DirScope { prev })
    }
}

impl Drop for DirScope {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CACHE.with(|c| *c.borrow_mut() = prev);
    }
}

/// How many of `ends` (increasing) are at most `common`, searched from the last one
/// outwards: a walk beside the last one (the next directory up or down a chain) shares
/// nearly all of it, found in a few steps wherever the chain's end is, instead of a binary
/// search over every level of it.
fn ends_upto(ends: &[usize], common: usize) -> usize {
    // Everything from `hi` on is past `common`.
    let (mut hi, mut step) = (ends.len(), 1);
    loop {
        let lo = hi.saturating_sub(step);
        let below = ends
            .get(..lo)
            .and_then(|b| b.last())
            .is_none_or(|&e| e <= common);
        if below {
            let rest = ends.get(lo..hi).unwrap_or_default();
            return lo + rest.partition_point(|&e| e <= common);
        }
        hi = lo - 1;
        step *= 2;
    }
}

impl DirCache {
    fn touch(&mut self, k: usize) {
        self.clock += 1;
        if let Some(node) = self.nodes.get_mut(k) {
            node.used = self.clock;
        }
        if k != 0 {
            self.lru.push_back((k, self.clock));
        }
    }

    /// Closes the least recently used descriptors beyond [`MAX_OPEN`].
    fn trim(&mut self) {
        while self.open > MAX_OPEN {
            let Some((k, t)) = self.lru.pop_front() else {
                break;
            };
            if let Some(node) = self.nodes.get_mut(k) {
                if node.used == t && !node.pinned && node.fd.take().is_some() {
                    self.open -= 1;
                }
            }
        }
        // Stale entries pile up when nothing needs closing: drop them now and then.
        if self.lru.len() > 8 * MAX_OPEN + 64 {
            let nodes = &self.nodes;
            self.lru
                .retain(|&(k, t)| nodes.get(k).is_some_and(|n| n.used == t && n.fd.is_some()));
        }
    }

    /// How many of the components of `c` ending at `limit` or before the last walk
    /// (`cursor`) covers: one comparison of bytes, then a binary search of the cursor's
    /// component ends.
    fn shared(&self, c: &Comps<'_>, limit: usize) -> usize {
        // Both prefixes of the same bytes (held alive by `cursor_src` and by `c`): they
        // agree up to the shorter one's end.
        let same = self
            .cursor_src
            .as_ref()
            .is_some_and(|s| s.as_bytes().as_ptr() == c.bytes.as_ptr());
        let common = if same {
            self.cursor_path.len().min(limit.min(c.bytes.len()))
        } else {
            common_prefix(&self.cursor_path, c.upto(limit))
        };
        let mut k = ends_upto(&self.cursor_ends, common);
        // A component of this path that merely starts with the walk's is not shared.
        if k > 0
            && self.cursor_ends.get(k - 1) == Some(&common)
            && common < limit
            && c.upto(limit).get(common) != Some(&b'/')
        {
            k -= 1;
        }
        k
    }

    /// Keeps the first `k` components of the cursor.
    fn truncate_cursor(&mut self, k: usize) {
        self.cursor.truncate(k);
        self.cursor_ends.truncate(k);
        let end = self.cursor_ends.last().copied().unwrap_or(0);
        self.cursor_path.truncate(end);
    }

    /// Extends the cursor by the directory `name`, node `node`.
    fn push_cursor(&mut self, node: usize, name: &[u8]) {
        if !self.cursor_path.is_empty() {
            self.cursor_path.push(b'/');
        }
        // Still a prefix of the path it came from only if `name` is that path's next
        // component (a walk of that path adds its own components).
        let at = self.cursor_path.len();
        let follows = self.cursor_src.as_ref().is_some_and(|s| {
            let b = s.as_bytes();
            b.get(at..at + name.len()) == Some(name)
                && b.get(at + name.len()).is_none_or(|&x| x == b'/')
        });
        if !follows {
            self.cursor_src = None;
        }
        self.cursor_path.extend_from_slice(name);
        self.cursor.push(node);
        self.cursor_ends.push(self.cursor_path.len());
    }

    /// Where the component after the cursor starts in a path that shares it.
    fn cursor_next(&self) -> usize {
        self.cursor_ends.last().map_or(0, |e| e + 1)
    }

    /// The deepest open directory among the components of `c` ending at `limit` or
    /// before: how many components it covers, where the next one starts, its descriptor
    /// and node.
    fn start(&mut self, c: &Comps<'_>, limit: usize) -> (usize, usize, Rc<OwnedFd>, usize) {
        let k = self.shared(c, limit);
        self.truncate_cursor(k);
        // The cursor is now a prefix of `c`, and grows along it.
        self.cursor_src = Some(c.rel.clone());
        // Further down the tree.
        let mut node = self.cursor.last().copied().unwrap_or(0);
        for (_, comp, _) in c.from(k, self.cursor_next(), limit) {
            let Some(&next) = self.nodes.get(node).and_then(|d| d.children.get(comp)) else {
                break;
            };
            self.push_cursor(next, comp);
            node = next;
        }
        // The deepest one still open.
        while let Some(&top) = self.cursor.last() {
            if let Some(fd) = self.nodes.get(top).and_then(|d| d.fd.clone()) {
                self.touch(top);
                return (self.cursor.len(), self.cursor_next(), fd, top);
            }
            self.truncate_cursor(self.cursor.len() - 1);
        }
        let root = self.nodes.first().and_then(|d| d.fd.clone());
        match root {
            Some(fd) => (0, 0, fd, 0),
            // Node 0 always holds the root; never reached.
            None => (0, 0, Rc::new(self.reopen_root()), 0),
        }
    }

    #[cold]
    fn reopen_root(&mut self) -> OwnedFd {
        match open_root(&self.root) {
            Ok(fd) => fd,
            Err(_) => std::process::abort(),
        }
    }

    /// Keeps node `k`, `depth` levels down, open; at half of [`MAX_OPEN`] kept, doubles the
    /// spacing and lets go of those off it.
    fn pin(&mut self, k: usize, depth: usize) {
        self.pins
            .retain(|&(n, _)| self.nodes.get(n).is_some_and(|d| d.pinned));
        if self.pins.len() >= MAX_OPEN / 2 {
            self.pin_every *= 2;
            let every = self.pin_every;
            let (keep, drop): (Vec<_>, Vec<_>) =
                self.pins.iter().partition(|&&(_, dp)| dp % every == 0);
            self.pins = keep;
            for (n, _) in drop {
                if let Some(d) = self.nodes.get_mut(n) {
                    d.pinned = false;
                    if d.fd.take().is_some() {
                        self.open -= 1;
                    }
                }
            }
            if !depth.is_multiple_of(every) {
                return;
            }
        }
        if let Some(d) = self.nodes.get_mut(k).filter(|d| !d.pinned) {
            d.pinned = true;
            self.pins.push((k, depth));
        }
    }

    /// Records `fd` as the directory `name` below `parent`; returns its node.
    fn remember(&mut self, parent: usize, name: &[u8], fd: &Rc<OwnedFd>) -> usize {
        let existing = self.nodes.get(parent).and_then(|d| d.children.get(name));
        let k = match existing {
            Some(&k) => k,
            None => {
                let k = self.nodes.len();
                self.nodes.push(DirNode {
                    fd: None,
                    children: HashMap::new(),
                    used: 0,
                    pinned: false,
                });
                if let Some(d) = self.nodes.get_mut(parent) {
                    d.children.insert(name.into(), k);
                }
                k
            }
        };
        if let Some(d) = self.nodes.get_mut(k) {
            if d.fd.replace(Rc::clone(fd)).is_none() {
                self.open += 1;
            }
        }
        self.touch(k);
        if self.cursor.last().copied().unwrap_or(0) == parent {
            self.push_cursor(k, name);
            let depth = self.cursor.len();
            if depth.is_multiple_of(self.pin_every) {
                self.pin(k, depth);
            }
        }
        self.trim();
        k
    }

    /// Forgets `rel` and everything below it.
    fn evict(&mut self, rel: &RelPath) {
        let c = Comps::of(rel);
        if rel.as_bytes().is_empty() {
            return;
        }
        let limit = c.parent_end();
        // The parent's node from the last walk where it covers it: removing a deep chain
        // of directories bottom-up then costs one comparison per directory, not a lookup
        // of each of its ancestors.
        let k = self.shared(&c, limit);
        let mut node = k
            .checked_sub(1)
            .and_then(|i| self.cursor.get(i))
            .copied()
            .unwrap_or(0);
        let off = k
            .checked_sub(1)
            .and_then(|i| self.cursor_ends.get(i))
            .map_or(0, |e| e + 1);
        // Whether the cursor holds the whole parent.
        let covers = k
            .checked_sub(1)
            .and_then(|i| self.cursor_ends.get(i))
            .map_or(limit == 0, |&e| e == limit);
        for (_, comp, _) in c.from(k, off, limit) {
            match self.nodes.get(node).and_then(|d| d.children.get(comp)) {
                Some(&k) => node = k,
                // Every walk records each directory it passes, so nothing below an
                // unknown directory is known: most calls (files) return here.
                None => return,
            }
        }
        let Some(gone) = self
            .nodes
            .get_mut(node)
            .and_then(|d| d.children.remove(c.last()))
        else {
            return;
        };
        let mut stack = vec![gone];
        while let Some(below) = stack.pop() {
            if let Some(d) = self.nodes.get_mut(below) {
                if d.fd.take().is_some() {
                    self.open -= 1;
                }
                d.pinned = false;
                stack.extend(d.children.drain().map(|(_, v)| v));
            }
        }
        // The last walk stays valid above the removed directory; it only went through it
        // if it covers the whole parent and holds that very node next.
        if covers && self.cursor.get(k) == Some(&gone) {
            self.truncate_cursor(k);
        }
    }
}

/// How many leading bytes of `rel` (whole components) this thread's scope for `root` has
/// already found free of `.git` aliases: all of them when `rel` is a prefix of the same
/// bytes as the last path that passed (an ancestor of it, checked next when a deep chain
/// of directories is walked bottom-up), none otherwise. Checking every directory of such
/// a chain then reads each name once, not once per directory below it.
pub(super) fn names_checked(root: &Path, rel: &RelPath) -> usize {
    CACHE.with(|cell| {
        let b = cell.borrow();
        let Some(passed) = b
            .as_ref()
            .filter(|d| d.root == root)
            .and_then(|d| d.names_passed.as_ref())
        else {
            return 0;
        };
        let (p, r) = (passed.as_bytes(), rel.as_bytes());
        // The same bytes (both held alive here): they agree up to the shorter end, which
        // is the end of a component of both.
        if p.as_ptr() == r.as_ptr() {
            p.len().min(r.len())
        } else {
            0
        }
    })
}

/// Remembers that every name of `rel` is free of `.git` aliases (see [`names_checked`]),
/// unless a longer path of the same bytes already passed.
pub(super) fn names_pass(root: &Path, rel: &RelPath) {
    CACHE.with(|cell| {
        if let Some(d) = cell.borrow_mut().as_mut().filter(|d| d.root == root) {
            let longer = d.names_passed.as_ref().is_some_and(|p| {
                p.as_bytes().as_ptr() == rel.as_bytes().as_ptr()
                    && p.as_bytes().len() >= rel.as_bytes().len()
            });
            if !longer {
                d.names_passed = Some(rel.clone());
            }
        }
    });
}

/// Where a walk down the components of `c` ending at `limit` or before starts (`limit`:
/// [`Comps::parent_end`] or [`Comps::whole_end`]): the deepest directory among
/// them open in this thread's scope for `root` (or the root, opened afresh without a
/// scope). Returns how many components that directory covers, where the next one starts in
/// the bytes, its descriptor, and its node
/// for [`remember`] (`None` without a scope).
pub(super) fn walk_start(
    root: &Path,
    c: &Comps<'_>,
    limit: usize,
) -> Result<(usize, usize, Rc<OwnedFd>, Option<usize>)> {
    let hit = CACHE.with(|cell| {
        let mut b = cell.borrow_mut();
        let d = b.as_mut().filter(|d| d.root == root)?;
        let (k, off, fd, node) = d.start(c, limit);
        Some((k, off, fd, Some(node)))
    });
    match hit {
        Some(x) => Ok(x),
        None => Ok((
            0,
            0,
            Rc::new(open_root(root).map_err(|e| Error::io("open directory", root, e))?),
            None,
        )),
    }
}

/// Records `fd` as the directory `name` below the directory `parent` (a node from
/// [`walk_start`] or from a previous call); returns its node.
pub(super) fn remember(
    root: &Path,
    parent: Option<usize>,
    name: &[u8],
    fd: &Rc<OwnedFd>,
) -> Option<usize> {
    let parent = parent?;
    CACHE.with(|c| {
        let mut b = c.borrow_mut();
        let d = b.as_mut().filter(|d| d.root == root)?;
        Some(d.remember(parent, name, fd))
    })
}

/// Forgets `rel` and everything below it (it was removed or renamed).
pub(super) fn evict(root: &Path, rel: &RelPath) {
    CACHE.with(|c| {
        if let Some(d) = c.borrow_mut().as_mut().filter(|d| d.root == root) {
            d.evict(rel);
        }
    });
}

// ---- raw syscalls ----

/// Descriptors this thread's scope holds open (tests of the bound [`MAX_OPEN`]).
#[cfg(test)]
pub(super) fn open_in_scope() -> usize {
    CACHE.with(|c| c.borrow().as_ref().map_or(0, |d| d.open))
}

#[cfg(test)]
mod tests {
    /// Searching a walk's component ends from the last one finds what a binary search
    /// over all of them finds, for every shared length.
    #[test]
    fn ends_upto_counts_like_a_binary_search() {
        for n in 0..40usize {
            let ends: Vec<usize> = (0..n).map(|i| 2 * i + 1).collect();
            for common in 0..2 * n + 3 {
                let want = ends.partition_point(|&e| e <= common);
                assert_eq!(super::ends_upto(&ends, common), want, "{n} {common}");
            }
        }
    }
}
