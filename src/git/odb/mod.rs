//! Read-only access to a git repository's object store.
//!
//! A snapshot of a clean git project does not need to copy tracked files whose content is
//! already in the user's object store: when the library later needs the base version of such a
//! file, it reads the blob by its id from `<git_dir>/objects` with [`ObjectStore::read_blob`].
//!
//! The reader is native (no `git` process) and **strictly read-only**: files are only ever
//! opened for reading; no lock file, index, pack, `.rev`/`.bitmap` or loose object is created,
//! touched or rewritten, so the user's repository is never written.
//!
//! Supported:
//! - loose objects (`objects/xx/<38 hex>`, zlib, `<type> <len>\0` header);
//! - packs (`objects/pack/*.idx` versions 1 and 2, including the large-offset table, and the
//!   matching `.pack`), with `OFS_DELTA` and `REF_DELTA` chains resolved iteratively (a
//!   `REF_DELTA` base may live in another pack, a loose file or an alternate);
//! - `objects/info/alternates`, recursively (relative entries are resolved against the objects
//!   directory that names them), and linked worktrees (`<git_dir>/commondir`);
//! - packs that appear after [`ObjectStore::open`] (e.g. a concurrent `git gc`): on a miss the
//!   pack directories are rescanned once before the object is reported missing.
//!
//! Every object that is returned has had its SHA-1 (`<type> <len>\0` + content) checked against
//! the requested id, so corrupt or mismatched data is an error, never silently wrong content.
//! Input-dependent failures (corrupt indexes, truncated packs, bad zlib streams, absurd sizes)
//! are [`Error::Git`] values, never panics. Only SHA-1 repositories are supported; opening a
//! repository with `extensions.objectFormat = sha256` is an error.
//!
//! A small LRU cache of recently reconstructed pack objects makes reading many versions of the
//! same file (which share delta bases) cheap.

mod cache;
mod idx;
mod loose;
mod pack;

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, IoContext, Result};
use crate::git::delta;
use crate::git::oid::{object_id, ObjectId, ObjectKind};
use crate::git::quote::unquote_c_style;
use cache::{Cache, Obj};
use loose::{loose_path, read_loose};
use pack::{Entry, EntryKind, Pack};

/// Longest delta chain that is followed before the data is declared corrupt (git's own
/// `pack-objects --depth` is capped at 4095).
const MAX_CHAIN: usize = 10_000;
/// How many times a `REF_DELTA` base may be looked up outside its own pack, nested.
const MAX_CROSS_DEPTH: u32 = 64;
/// Alternates nesting limit (git uses 5).
const MAX_ALTERNATE_DEPTH: u32 = 5;
/// Upper bound for a speculative allocation made from a size read out of the repository; the
/// buffer grows past it only as real data arrives.
const PREALLOC_MAX: u64 = 16 << 20;

fn git_err(path: &Path, reason: impl Into<String>) -> Error {
    Error::Git {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Maps an error from reading a zlib stream: data errors are corruption ([`Error::Git`]),
/// anything else is an I/O failure.
fn stream_err(path: &Path, what: &str, e: std::io::Error) -> Error {
    use std::io::ErrorKind::*;
    match e.kind() {
        InvalidData | InvalidInput | UnexpectedEof => git_err(path, format!("{what}: {e}")),
        _ => Error::io("read object data", path, e),
    }
}

/// Reads as many bytes as are available at `off`, up to `buf.len()`.
fn read_at_most(file: &File, off: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

// ---------------------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------------------

enum Slot {
    Ok(Arc<Pack>),
    Broken { idx_path: PathBuf, reason: String },
}

impl Slot {
    fn idx_path(&self) -> &Path {
        match self {
            Slot::Ok(p) => &p.idx.path,
            Slot::Broken { idx_path, .. } => idx_path,
        }
    }
}

/// Read-only access to `<git_dir>/objects`, its alternates (recursively) and, for a linked
/// worktree, the objects of the common directory.
///
/// `ObjectStore` is `Send + Sync` and meant to be shared in an `Arc`; it keeps one open file
/// handle per pack and per large pack index, reads with `pread`, and never writes anything.
///
/// ```
/// use std::io::Write;
/// use std::process::{Command, Stdio};
/// use patchbox::git::odb::ObjectStore;
/// use patchbox::git::oid::ObjectId;
///
/// let tmp = tempfile::tempdir()?;
/// let git = |args: &[&str]| {
///     Command::new("git")
///         .args(args)
///         .current_dir(tmp.path())
///         .env("HOME", tmp.path())
///         .env("GIT_CONFIG_NOSYSTEM", "1")
///         .stdin(Stdio::piped())
///         .stdout(Stdio::piped())
///         .spawn()
/// };
/// git(&["init", "-q"])?.wait()?;
/// let mut child = git(&["hash-object", "-w", "--stdin"])?;
/// child.stdin.take().unwrap().write_all(b"hello\n")?;
/// let out = child.wait_with_output()?;
/// let oid: ObjectId = String::from_utf8_lossy(&out.stdout).trim().parse()?;
///
/// let store = ObjectStore::open(&tmp.path().join(".git"))?;
/// assert!(store.contains(&oid));
/// assert_eq!(store.read_blob(&oid)?.as_deref(), Some(&b"hello\n"[..]));
/// assert_eq!(store.read_blob(&ObjectId::from_bytes([0x11; 20]))?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ObjectStore {
    git_dir: PathBuf,
    /// The primary objects directory first, then alternates in discovery order.
    object_dirs: Vec<PathBuf>,
    /// Append-only; replaced wholesale (copy on write) by a rescan.
    packs: RwLock<Arc<Vec<Slot>>>,
    rescan_lock: Mutex<()>,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStore")
            .field("git_dir", &self.git_dir)
            .field("object_dirs", &self.object_dirs)
            .field("packs", &self.packs.read().len())
            .finish()
    }
}

/// [`ObjectStore::contains`] for many ids in a row (a snapshot's tracked files): the pack
/// list is taken once, not per question, so threads asking at once share no lock or
/// counter (per question that cost as much as the index search itself). A miss still
/// looks for packs that appeared since, as `contains` does, so the answer is the same.
pub struct Lookup<'a> {
    store: &'a ObjectStore,
    packs: Arc<Vec<Slot>>,
}

impl Lookup<'_> {
    /// Whether the object exists (see [`ObjectStore::contains`]).
    pub fn contains(&self, oid: &ObjectId) -> bool {
        self.store.contains_in(&self.packs, oid)
            || (self.store.rescan().is_ok() && self.store.contains_now(oid))
    }
}

impl ObjectStore {
    /// Opens the object store of the repository whose git directory is `git_dir` (a `.git`
    /// directory, a bare repository, a linked worktree's `.git/worktrees/<name>`, or a
    /// `.git` file containing `gitdir: <path>`).
    ///
    /// Reads `commondir`, `objects/info/alternates` (recursively) and every pack index. A pack
    /// whose index or data is corrupt does not make `open` fail; lookups that cannot be
    /// answered without it return an error instead.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new("/src/project/.git"))?;
    /// # Ok(()) }
    /// ```
    pub fn open(git_dir: &Path) -> Result<ObjectStore> {
        let git_dir = resolve_gitfile(git_dir)?;
        let common = match std::fs::read(git_dir.join("commondir")) {
            Ok(raw) => {
                let text = trim_line_end(&raw);
                if text.is_empty() {
                    return Err(git_err(&git_dir.join("commondir"), "empty commondir"));
                }
                let p = PathBuf::from(std::ffi::OsString::from_vec(text.to_vec()));
                if p.is_absolute() {
                    p
                } else {
                    git_dir.join(p)
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => git_dir.clone(),
            Err(e) => return Err(Error::io("read commondir", git_dir.join("commondir"), e)),
        };
        check_object_format(&common.join("config"))?;
        let objects = common.join("objects");
        let meta = std::fs::metadata(&objects).ctx("open objects directory", &objects)?;
        if !meta.is_dir() {
            return Err(git_err(&objects, "not a directory"));
        }
        let mut object_dirs = Vec::new();
        let mut seen = HashSet::new();
        collect_object_dirs(&objects, 0, &mut object_dirs, &mut seen)?;
        let store = ObjectStore {
            git_dir,
            object_dirs,
            packs: RwLock::new(Arc::new(Vec::new())),
            rescan_lock: Mutex::new(()),
            cache: Mutex::new(Cache::default()),
        };
        store.rescan()?;
        Ok(store)
    }

    /// The objects directories searched, primary first, then alternates.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new(".git"))?;
    /// for dir in store.object_dirs() {
    ///     println!("{}", dir.display());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn object_dirs(&self) -> &[PathBuf] {
        &self.object_dirs
    }

    /// The content of blob `oid`.
    ///
    /// `Ok(None)` when the object is not in the store; [`Error::Git`] when it is there but is
    /// not a blob, or its data is corrupt (including a SHA-1 that does not match `oid`).
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// use patchbox::git::odb::ObjectStore;
    /// use patchbox::git::oid::blob_id;
    /// let store = ObjectStore::open(std::path::Path::new(".git"))?;
    /// let oid = blob_id(b""); // e69de29bb2d1d6434b8b29ae775ad8c2e48c5391
    /// if let Some(data) = store.read_blob(&oid)? {
    ///     assert!(data.is_empty());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_blob(&self, oid: &ObjectId) -> Result<Option<Vec<u8>>> {
        match self.read_object(oid)? {
            None => Ok(None),
            Some((ObjectKind::Blob, data)) => Ok(Some(data)),
            Some((kind, _)) => Err(git_err(
                &self.git_dir,
                format!("object {oid} is a {}, not a blob", kind.as_str()),
            )),
        }
    }

    /// The type and content of object `oid`, verified against its id; `Ok(None)` when the
    /// object is not in the store.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// use patchbox::git::odb::ObjectStore;
    /// use patchbox::git::oid::ObjectId;
    /// let store = ObjectStore::open(std::path::Path::new(".git"))?;
    /// if let Some((kind, data)) = store.read_object(&ObjectId::from_bytes([0x12; 20]))? {
    ///     println!("{} of {} bytes", kind.as_str(), data.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_object(&self, oid: &ObjectId) -> Result<Option<(ObjectKind, Vec<u8>)>> {
        Ok(self
            .read_depth(oid, 0)?
            .map(|(k, d)| (k, Arc::try_unwrap(d).unwrap_or_else(|a| (*a).clone()))))
    }

    /// Whether the object exists: an index lookup or a file-existence check, without reading
    /// or verifying the data. Objects only listed by a pack that could not be opened do not
    /// count.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// use patchbox::git::oid::ObjectId;
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new(".git"))?;
    /// assert!(!store.contains(&ObjectId::default()));
    /// # Ok(()) }
    /// ```
    pub fn contains(&self, oid: &ObjectId) -> bool {
        if self.contains_now(oid) {
            return true;
        }
        self.rescan().is_ok() && self.contains_now(oid)
    }

    /// [`contains`](Self::contains) without looking for packs that appeared since the store
    /// was opened (or last rescanned): a miss costs no listing of the pack directories. For
    /// callers that ask about many ids that are mostly absent (the objects of a snapshot).
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// use patchbox::git::oid::ObjectId;
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new(".git"))?;
    /// assert!(!store.contains_known(&ObjectId::default()));
    /// # Ok(()) }
    /// ```
    pub fn contains_known(&self, oid: &ObjectId) -> bool {
        self.contains_now(oid)
    }

    /// A [`Lookup`]: many [`contains`](Self::contains) questions against the packs known
    /// now, from any number of threads.
    ///
    /// ```no_run
    /// # fn main() -> patchbox::Result<()> {
    /// use patchbox::git::oid::ObjectId;
    /// let store = patchbox::git::odb::ObjectStore::open(std::path::Path::new(".git"))?;
    /// let lookup = store.lookup();
    /// assert!(!lookup.contains(&ObjectId::default()));
    /// # Ok(()) }
    /// ```
    pub fn lookup(&self) -> Lookup<'_> {
        Lookup {
            store: self,
            packs: self.packs.read().clone(),
        }
    }

    fn contains_now(&self, oid: &ObjectId) -> bool {
        // The list is taken out of the lock first: a rescan is not kept waiting meanwhile.
        let packs = self.packs.read().clone();
        self.contains_in(&packs, oid)
    }

    fn contains_in(&self, packs: &[Slot], oid: &ObjectId) -> bool {
        for slot in packs {
            if let Slot::Ok(p) = slot {
                if matches!(p.idx.has(oid), Ok(true)) {
                    return true;
                }
            }
        }
        self.object_dirs
            .iter()
            .any(|d| std::fs::metadata(loose_path(d, oid)).is_ok_and(|m| m.is_file()))
    }

    fn read_depth(&self, oid: &ObjectId, depth: u32) -> Result<Option<Obj>> {
        if depth > MAX_CROSS_DEPTH {
            return Err(git_err(
                &self.git_dir,
                format!("delta bases of {oid} nest too deeply"),
            ));
        }
        if let Some(o) = self.try_read(oid, depth)? {
            return Ok(Some(o));
        }
        self.rescan()?;
        if let Some(o) = self.try_read(oid, depth)? {
            return Ok(Some(o));
        }
        let packs = self.packs.read().clone();
        for slot in packs.iter() {
            if let Slot::Broken { idx_path, reason } = slot {
                return Err(git_err(
                    idx_path,
                    format!("object {oid} not found, and this pack is unreadable: {reason}"),
                ));
            }
        }
        Ok(None)
    }

    fn try_read(&self, oid: &ObjectId, depth: u32) -> Result<Option<Obj>> {
        let packs = self.packs.read().clone();
        for slot in packs.iter() {
            if let Slot::Ok(p) = slot {
                if let Some(off) = p.idx.find(oid)? {
                    let (kind, data) = self.read_packed(p, off, depth)?;
                    verify(&p.path, oid, kind, &data)?;
                    return Ok(Some((kind, data)));
                }
            }
        }
        for dir in &self.object_dirs {
            if let Some((kind, data)) = read_loose(&loose_path(dir, oid))? {
                verify(&loose_path(dir, oid), oid, kind, &data)?;
                return Ok(Some((kind, Arc::new(data))));
            }
        }
        Ok(None)
    }

    /// Reconstructs the object at `off` in `pack`, following its delta chain iteratively.
    fn read_packed(&self, pack: &Pack, off: u64, depth: u32) -> Result<Obj> {
        // Delta entries from the requested object down to (excluding) the base.
        let mut chain: Vec<(u64, Entry)> = Vec::new();
        let mut cur = off;
        let (kind, mut data) = loop {
            if let Some(hit) = self.cache.lock().get((pack.id, cur)) {
                break hit;
            }
            if chain.len() >= MAX_CHAIN {
                return Err(pack.corrupt(off, "delta chain is too long (cycle?)"));
            }
            let e = pack.entry(cur)?;
            match e.kind {
                EntryKind::Base(k) => {
                    let d = Arc::new(pack.inflate(cur, e.data_pos, e.size)?);
                    let obj = (k, d);
                    if !chain.is_empty() {
                        self.cache.lock().put((pack.id, cur), &obj);
                    }
                    break obj;
                }
                EntryKind::Ofs(base) => {
                    chain.push((cur, e));
                    cur = base;
                }
                EntryKind::Ref(base_oid) => {
                    chain.push((cur, e));
                    if let Some(o) = pack.idx.find(&base_oid)? {
                        cur = o;
                        continue;
                    }
                    // A base outside this pack (another pack, loose, an alternate).
                    match self.read_depth(&base_oid, depth + 1)? {
                        Some(o) => break o,
                        None => {
                            return Err(
                                pack.corrupt(cur, format!("delta base {base_oid} is missing"))
                            )
                        }
                    }
                }
            }
        };
        for (eoff, e) in chain.iter().rev() {
            let delta = pack.inflate(*eoff, e.data_pos, e.size)?;
            let out = delta::apply(&data, &delta, u64::MAX).map_err(|e| pack.corrupt(*eoff, e))?;
            data = Arc::new(out);
            self.cache
                .lock()
                .put((pack.id, *eoff), &(kind, data.clone()));
        }
        Ok((kind, data))
    }

    /// Opens pack indexes that are not known yet (all of them on the first call).
    fn rescan(&self) -> Result<()> {
        let _guard = self.rescan_lock.lock();
        let current = self.packs.read().clone();
        let known: HashSet<&Path> = current.iter().map(Slot::idx_path).collect();
        let mut added = Vec::new();
        let mut next_id = current.len() as u32;
        for dir in &self.object_dirs {
            let pack_dir = dir.join("pack");
            let rd = match std::fs::read_dir(&pack_dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("list pack directory", &pack_dir, e)),
            };
            let mut idxs = Vec::new();
            for ent in rd {
                let ent = ent.ctx("list pack directory", &pack_dir)?;
                let p = ent.path();
                if p.extension().is_some_and(|x| x == "idx") && !known.contains(p.as_path()) {
                    idxs.push(p);
                }
            }
            idxs.sort();
            for p in idxs {
                match Pack::open(next_id, &p) {
                    Ok(Some(pack)) => {
                        added.push(Slot::Ok(Arc::new(pack)));
                        next_id += 1;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        added.push(Slot::Broken {
                            idx_path: p,
                            reason: e.to_string(),
                        });
                        next_id += 1;
                    }
                }
            }
        }
        if !added.is_empty() {
            let mut all: Vec<Slot> = Vec::with_capacity(current.len() + added.len());
            for s in current.iter() {
                all.push(match s {
                    Slot::Ok(p) => Slot::Ok(p.clone()),
                    Slot::Broken { idx_path, reason } => Slot::Broken {
                        idx_path: idx_path.clone(),
                        reason: reason.clone(),
                    },
                });
            }
            all.extend(added);
            *self.packs.write() = Arc::new(all);
        }
        Ok(())
    }
}

/// Checks the SHA-1 of an object against the id it was requested by.
fn verify(path: &Path, oid: &ObjectId, kind: ObjectKind, data: &[u8]) -> Result<()> {
    let got = object_id(kind, data);
    if got != *oid {
        return Err(git_err(
            path,
            format!("object {oid} hashes to {got} (corrupt data)"),
        ));
    }
    Ok(())
}
fn trim_line_end(raw: &[u8]) -> &[u8] {
    let mut t = raw;
    while let [rest @ .., b'\n' | b'\r'] = t {
        t = rest;
    }
    t
}

/// Follows a `.git` file (`gitdir: <path>`); directories are returned as they are.
fn resolve_gitfile(path: &Path) -> Result<PathBuf> {
    let meta = std::fs::metadata(path).ctx("open git directory", path)?;
    if meta.is_dir() {
        return Ok(path.to_path_buf());
    }
    let raw = std::fs::read(path).ctx("read gitfile", path)?;
    let text = trim_line_end(&raw);
    let target = text
        .strip_prefix(b"gitdir: ")
        .ok_or_else(|| git_err(path, "not a git directory or gitfile"))?;
    let p = PathBuf::from(std::ffi::OsString::from_vec(target.to_vec()));
    Ok(if p.is_absolute() {
        p
    } else {
        path.parent().unwrap_or(Path::new(".")).join(p)
    })
}

/// Refuses repositories whose objects are not SHA-1.
fn check_object_format(config: &Path) -> Result<()> {
    let raw = match std::fs::read(config) {
        Ok(r) => r,
        Err(_) => return Ok(()),
    };
    for line in raw.split(|&b| b == b'\n') {
        let l: Vec<u8> = line
            .iter()
            .filter(|b| !b.is_ascii_whitespace())
            .map(u8::to_ascii_lowercase)
            .collect();
        if let Some(v) = l.strip_prefix(b"objectformat=") {
            let v = v.split(|&b| b == b'#' || b == b';').next().unwrap_or(&[]);
            let v = v.strip_prefix(b"\"").unwrap_or(v);
            let v = v.strip_suffix(b"\"").unwrap_or(v);
            if v != b"sha1" {
                return Err(git_err(
                    config,
                    format!(
                        "object format {:?} is not supported (only sha1)",
                        String::from_utf8_lossy(v)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Adds `objects` and, recursively, its alternates to `out` (each directory once).
fn collect_object_dirs(
    objects: &Path,
    depth: u32,
    out: &mut Vec<PathBuf>,
    seen: &mut HashSet<PathBuf>,
) -> Result<()> {
    let canon = std::fs::canonicalize(objects).unwrap_or_else(|_| objects.to_path_buf());
    if !seen.insert(canon) {
        return Ok(());
    }
    out.push(objects.to_path_buf());
    if depth >= MAX_ALTERNATE_DEPTH {
        return Ok(());
    }
    let alt_file = objects.join("info").join("alternates");
    let raw = match std::fs::read(&alt_file) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read alternates", &alt_file, e)),
    };
    for line in raw.split(|&b| b == b'\n') {
        let line = trim_line_end(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let bytes = if line[0] == b'"' {
            match unquote_c_style(line) {
                Some((b, used)) if used == line.len() => b,
                _ => return Err(git_err(&alt_file, "badly quoted entry")),
            }
        } else {
            line.to_vec()
        };
        let p = PathBuf::from(std::ffi::OsString::from_vec(bytes));
        let p = if p.is_absolute() { p } else { objects.join(p) };
        // Like git: an alternate that does not exist is ignored.
        if std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
            collect_object_dirs(&p, depth + 1, out, seen)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<ObjectStore>();
        check::<Arc<ObjectStore>>();
    }

    #[test]
    fn object_format_check() {
        let tmp = tempfile::tempdir().unwrap();
        let c = tmp.path().join("config");
        std::fs::write(&c, "[extensions]\n\tobjectFormat = sha256\n").unwrap();
        assert!(check_object_format(&c).is_err());
        std::fs::write(&c, "[extensions]\n\tobjectformat = sha1\n").unwrap();
        assert!(check_object_format(&c).is_ok());
        assert!(check_object_format(&tmp.path().join("none")).is_ok());
    }
}
