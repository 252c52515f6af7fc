//! Shared lower layers: a git project's tracked files materialized once under the root and
//! stacked, read-only, under the overlay sandboxes of every later session or plan of that
//! project.
//!
//! Materializing a session's snapshot for OverlayFS (`.lower/`) costs one inode per file of
//! the project: on a 20,000-file project as much as a `git worktree add`, paid again by every
//! session. Yet between two sessions of a project almost every tracked file is unchanged —
//! the same blob, mode and mtime. So the first overlay session of a git project writes those
//! files (the snapshot's [`BaseSrc::Blob`] nodes: clean tracked files, content named by their
//! blob id) into a *shared layer* `<root>/lowers/<project-key>/<ulid>/tree/`, with a
//! [`Manifest`] of what each file is; every later session stacks that layer under its own
//! `.lower/`, which then holds only the difference: its other nodes (untracked and modified
//! files, symlinks), the shared files whose blob, mode or mtime differ, whiteouts for shared
//! files the snapshot lacks, and the private `.git`. The view through the mount is the same
//! tree, file for file, mode and mtime included, as the copy a `copy` session makes.
//!
//! ```text
//! <root>/lowers/<project-key>/    one directory per project (a hash of its path)
//!   project                       the project's path (a gone project's layers are swept)
//!   <ulid>/tree/                  the shared layer: never written once renamed in place
//!   <ulid>/manifest               what it holds: per file, path, mode, blob id, mtime
//!   <ulid>/holders/<key>          a plan snapshot stacking it (the file holds its path)
//!   .creating-<ulid>/             a layer being written (renamed to <ulid>/ when complete)
//! <root>/<session>/.lower.shared  the shared layer a session stacks (absolute path)
//! ```
//!
//! A layer is immutable once published (OverlayFS forbids changing a lower layer under a
//! mount). A session holds a shared `flock` on the manifest for its life and records the
//! layer in `.lower.shared` before anything is mounted; an older layer of the project is
//! removed only when nobody holds it, no session directory names it and no holder
//! directory (a plan's snapshot, see [`hold_for`]) exists, so crash recovery always finds
//! the layers it records. Plans' snapshots stack the same layers as sessions (see
//! [`super::layered`]): one store, one sweep.
//!
//! ```
//! use patchbox::fs::Timestamp;
//! use patchbox::git::oid::ObjectId;
//! use patchbox::isolation::shared_lower::{Manifest, ManifestFile};
//! let m = Manifest {
//!     files: vec![ManifestFile {
//!         path: b"src/main.c".to_vec(),
//!         executable: false,
//!         oid: ObjectId::from_bytes([7; 20]),
//!         mtime: Timestamp::new(1_700_000_000, 5),
//!     }],
//! };
//! assert_eq!(Manifest::decode(&m.encode()), Some(m));
//! ```
//!
//! [`BaseSrc::Blob`]: crate::tree::base::BaseSrc::Blob

use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::layer_digest::{self, Digester, LayerDigest};
use crate::error::{Error, IoContext, Result};
use crate::fs::state_dir::{self, StateDir, StatePath};
use crate::fs::RelPath;
use crate::fs::Timestamp;
use crate::git::oid::{push_hex, ObjectId, ObjectKind};

/// The file, in a session directory, naming the shared lower layer stacked under its
/// `.lower/` (an absolute path), when the session uses one. Written before anything is
/// mounted, so recovery stacks the same layers; the sweep keeps every layer one names.
pub const SHARED_LOWER_FILE: &str = ".lower.shared";

/// The store's directory under the root.
pub const STORE_DIR: &str = "lowers";

/// A layer's files, in its directory.
pub const TREE_DIR: &str = "tree";

/// A layer's manifest, in its directory.
pub const MANIFEST_FILE: &str = "manifest";

/// A layer's directory of holders: one file per directory outside the session directories
/// (a plan's snapshot) that uses the layer, holding that directory's path.
pub const HOLDERS_DIR: &str = "holders";

/// Prefix of a layer being written.
const CREATING_PREFIX: &str = ".creating-";

/// Prefix of a layer being removed.
const TRASH_PREFIX: &str = ".trash-";

/// The project a store serves, by path, in the store's directory (written with its first
/// layer): once that path is gone, its newest layer serves no one and is swept too.
pub const PROJECT_FILE: &str = "project";

/// First line of an encoded manifest (format version 1).
const MAGIC: &[u8] = b"patchbox-shared-lower-1\n";

/// One file of a shared layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFile {
    /// Path relative to the layer, as bytes.
    pub path: Vec<u8>,
    /// Whether it was written with mode 0755 (else 0644).
    pub executable: bool,
    /// The blob id of its content.
    pub oid: ObjectId,
    /// Its modification time (seconds, nanoseconds).
    pub mtime: Timestamp,
}

/// What a shared layer holds, sorted by path bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Its files.
    pub files: Vec<ManifestFile>,
}

impl Manifest {
    /// The manifest as stored: the magic line, then per file `x|-`, the blob id in hex, the
    /// mtime, a space and the path, NUL-terminated (paths may hold any byte but NUL).
    ///
    /// The buffer is sized once (a record is at most 86 bytes besides its path): on a tree of
    /// 100k files it is megabytes, made while the manifest itself is held.
    pub fn encode(&self) -> Vec<u8> {
        use std::io::Write;
        let size: usize = self.files.iter().map(|f| f.path.len() + 86).sum();
        let mut out = Vec::with_capacity(MAGIC.len() + size);
        out.extend_from_slice(MAGIC);
        for f in &self.files {
            out.push(if f.executable { b'x' } else { b'-' });
            out.push(b' ');
            push_hex(f.oid.as_bytes(), &mut out);
            // Writing into a `Vec` cannot fail.
            let _ = write!(out, " {} {} ", f.mtime.secs, f.mtime.nanos);
            out.extend_from_slice(&f.path);
            out.push(0);
        }
        out
    }

    /// The digest of this list of files ([`layer_digest`]): what a snapshot compares its
    /// clean tracked files with, instead of the whole manifest.
    pub fn digest(&self) -> LayerDigest {
        let mut d = Digester::new();
        for f in &self.files {
            d.add(&f.path, f.executable, &f.oid, f.mtime);
        }
        d.finish()
    }

    /// Reads a manifest back; `None` when the bytes are not one.
    pub fn decode(data: &[u8]) -> Option<Manifest> {
        let rest = data.strip_prefix(MAGIC)?;
        let mut files = Vec::new();
        for rec in rest.split(|b| *b == 0) {
            if rec.is_empty() {
                continue;
            }
            // `x|- <40 hex> <secs> <nanos> <path>`: fixed fields first, parsed in place (the
            // manifest of a large tree has ~100k records, read at every later create).
            let executable = match rec.get(..2)? {
                b"x " => true,
                b"- " => false,
                _ => return None,
            };
            let oid = ObjectId::from_hex_bytes(rec.get(2..42)?)?;
            let rest = rec.get(42..)?.strip_prefix(b" ")?;
            let (secs, rest) = split_int(rest)?;
            let (nanos, path) = split_int(rest)?;
            let mtime = Timestamp::new(secs, nanos);
            let path = path.to_vec();
            if path.is_empty() {
                return None;
            }
            files.push(ManifestFile {
                path,
                executable,
                oid,
                mtime,
            });
        }
        if files.windows(2).any(|w| w[0].path >= w[1].path) {
            return None;
        }
        Some(Manifest { files })
    }

    /// For each of `paths`, the index of the file the layer holds there, if any. Paths in
    /// ascending byte order (a base's nodes are) are matched in one merge with the
    /// manifest; one out of order is looked up alone.
    pub fn positions<'a>(&self, paths: impl IntoIterator<Item = &'a [u8]>) -> Vec<Option<usize>> {
        let mut j = 0;
        let mut prev: Option<&[u8]> = None;
        paths
            .into_iter()
            .map(|p| {
                if prev.is_some_and(|q| p < q) {
                    return self
                        .files
                        .binary_search_by(|f| f.path.as_slice().cmp(p))
                        .ok();
                }
                prev = Some(p);
                while j < self.files.len() && self.files[j].path.as_slice() < p {
                    j += 1;
                }
                (j < self.files.len() && self.files[j].path == p).then_some(j)
            })
            .collect()
    }

    /// The file at `path`, if the layer holds one.
    pub fn get(&self, path: &[u8]) -> Option<&ManifestFile> {
        self.files
            .binary_search_by(|f| f.path.as_slice().cmp(path))
            .ok()
            .map(|i| &self.files[i])
    }
}

/// A decimal `i64` (an optional `-`, then digits) ended by a space, and what follows the
/// space; `None` for anything else or an overflow.
fn split_int(b: &[u8]) -> Option<(i64, &[u8])> {
    let end = b.iter().position(|&c| c == b' ')?;
    let (neg, digits) = match b[..end].strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, &b[..end]),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    // Negative values are accumulated as such, so `i64::MIN` reads back too.
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some((v, &b[end + 1..]))
}

/// A published shared layer, held (shared `flock` on its manifest) while this value lives.
#[derive(Debug)]
pub struct SharedLayer {
    /// The layer's directory (`<ulid>/`).
    pub dir: PathBuf,
    /// What it holds, read on first need ([`Self::manifest`]): a snapshot whose clean
    /// tracked files match the layer's digest never reads it.
    manifest: std::sync::OnceLock<Manifest>,
    /// Its digest, as recorded beside it (`None`: a layer made before digests, or its
    /// record unreadable).
    digest: Option<LayerDigest>,
    _hold: File,
}

impl SharedLayer {
    /// The layer's files (`<ulid>/tree/`): what is stacked under a session's `.lower/`.
    pub fn tree(&self) -> PathBuf {
        self.dir.join(TREE_DIR)
    }

    /// What the layer holds, read and decoded on the first call. Errors: the manifest
    /// cannot be read or is not one (the layer is held, so it has not been removed).
    pub fn manifest(&self) -> Result<&Manifest> {
        if let Some(m) = self.manifest.get() {
            return Ok(m);
        }
        let mpath = self.dir.join(MANIFEST_FILE);
        let data = std::fs::read(&mpath).ctx("read shared lower manifest", &mpath)?;
        let m = Manifest::decode(&data).ok_or_else(|| {
            Error::io(
                "decode shared lower manifest",
                &mpath,
                std::io::Error::from(std::io::ErrorKind::InvalidData),
            )
        })?;
        Ok(self.manifest.get_or_init(|| m))
    }

    /// Lets go of the decoded manifest (tens of MB on a large tree); a later
    /// [`Self::manifest`] reads it again.
    pub fn release_manifest(&mut self) {
        self.manifest = std::sync::OnceLock::new();
    }

    /// The layer's digest: as recorded, else computed from its manifest (a layer made
    /// before digests) and recorded for the next snapshot, best effort.
    pub fn digest(&self) -> Result<LayerDigest> {
        if let Some(d) = self.digest {
            return Ok(d);
        }
        let d = self.manifest()?.digest();
        if let Ok(dir) = StateDir::open(&self.dir) {
            let _ = layer_digest::record(&dir, &d);
        }
        Ok(d)
    }

    /// Whether `d` is the layer's digest, as recorded: `false` when the layer has none
    /// recorded (the caller then compares the manifest, and may record the digest).
    pub fn has_digest(&self, d: &LayerDigest) -> bool {
        self.digest.as_ref() == Some(d)
    }

    /// How many files the layer holds: from its digest when recorded, else its manifest.
    pub fn file_count(&self) -> Result<usize> {
        match self.digest {
            Some(d) => usize::try_from(d.files).map_err(|_| {
                Error::io(
                    "read shared lower digest",
                    &self.dir,
                    std::io::Error::from(std::io::ErrorKind::InvalidData),
                )
            }),
            None => Ok(self.manifest()?.files.len()),
        }
    }
}

/// The store directory of `project`'s layers: `<root>/lowers/<first 16 hex digits of the
/// SHA-1 of the project's canonical path>`.
pub fn project_dir(root: &Path, project: &Path) -> PathBuf {
    let id = crate::git::oid::object_id(ObjectKind::Blob, project.as_os_str().as_bytes());
    let hex = id.to_hex();
    root.join(STORE_DIR).join(&hex[..16])
}

/// Opens (creating it if needed) the store directory of `project` as a capability.
fn open_store(root: &Path, project: &Path) -> Result<StateDir> {
    let dir = project_dir(root, project);
    std::fs::create_dir_all(&dir).ctx("create shared lower store", &dir)?;
    StateDir::open(&dir)
}

/// The newest published layer of `project`, held; `None` when there is none (or its
/// manifest cannot be read: then a new one is made rather than trusting it).
pub fn newest(root: &Path, project: &Path) -> Result<Option<SharedLayer>> {
    let dir = project_dir(root, project);
    let names: Vec<std::ffi::OsString> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("list shared lower layers", &dir, e)),
    };
    let Some(name) = newest_name(&names) else {
        return Ok(None);
    };
    open_layer(&dir.join(name))
}

/// The newest published layer among a store's entries: the greatest ULID name (layers being
/// written or removed carry a prefix, and are not layers yet).
fn newest_name(names: &[std::ffi::OsString]) -> Option<&str> {
    names
        .iter()
        .filter_map(|n| n.to_str())
        .filter(|n| is_ulid(n))
        .max()
}

/// Opens and holds the layer at `dir`; `None` when it vanished, or when it has no digest
/// recorded and its manifest is not one. With a digest the manifest is left unread until
/// someone needs it ([`SharedLayer::manifest`]).
fn open_layer(dir: &Path) -> Result<Option<SharedLayer>> {
    let mpath = dir.join(MANIFEST_FILE);
    let file = match File::open(&mpath) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open shared lower manifest", &mpath, e)),
    };
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockShared)
        .map_err(|e| Error::io("lock shared lower manifest", &mpath, e.into()))?;
    // Held now: a remover takes the lock exclusively before renaming the layer away, so the
    // layer is still in place if its manifest still is.
    let layer = SharedLayer {
        dir: dir.to_path_buf(),
        manifest: std::sync::OnceLock::new(),
        digest: layer_digest::read(dir),
        _hold: file,
    };
    if layer.digest.is_some() {
        return Ok(Some(layer));
    }
    let data = match std::fs::read(&mpath) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read shared lower manifest", &mpath, e)),
    };
    Ok(Manifest::decode(&data).map(|m| {
        let _ = layer.manifest.set(m);
        layer
    }))
}

/// A layer being written: `fill` writes the files into the given directory (a
/// [`StatePath`] beneath the store) and returns its manifest; the layer is then published
/// under a new ULID, and held. A failure leaves nothing behind.
pub fn make(
    root: &Path,
    project: &Path,
    fill: impl FnOnce(&StatePath) -> Result<Manifest>,
) -> Result<SharedLayer> {
    let store = open_store(root, project)?;
    sweep_abandoned(&store);
    let pfile = store.join(Path::new(PROJECT_FILE))?;
    if !matches!(state_dir::exists(&pfile), Ok(true)) {
        // Unsynced: lost to a crash, it is written with the next layer; until then the
        // store's newest layer is kept, as it always was.
        state_dir::write_atomic_unsynced(&pfile, project.as_os_str().as_bytes())?;
    }
    let ulid = crate::id::next_string();
    let tmp = store.join(Path::new(&format!("{CREATING_PREFIX}{ulid}")))?;
    state_dir::create_dir_new(&tmp)?;
    let made = (|| -> Result<Manifest> {
        let tree = tmp.child(&RelPath::new(TREE_DIR)?);
        // On Btrfs (as root) a subvolume: a plan's copy of the layer is then a snapshot.
        let sub = crate::fs::btrfs::create_subvolume_in(tmp.as_path(), TREE_DIR.as_ref())
            .map_err(|e| Error::io("create subvolume", tree.as_path(), e))?;
        if !sub {
            state_dir::create_dir_new(&tree)?;
        }
        let manifest = fill(&tree)?;
        // The digest before the manifest: a layer whose manifest is in place has both.
        let d = tmp.child(&RelPath::new(layer_digest::FILE)?);
        state_dir::write_atomic(&d, &manifest.digest().encode())?;
        let m = tmp.child(&RelPath::new(MANIFEST_FILE)?);
        state_dir::write_atomic(&m, &manifest.encode())?;
        Ok(manifest)
    })();
    let manifest = match made {
        Ok(m) => m,
        Err(e) => {
            let _ = state_dir::remove_tree(&tmp);
            return Err(e);
        }
    };
    let dst = store.join(Path::new(&ulid))?;
    if let Err(e) = state_dir::rename(&tmp, &dst) {
        let _ = state_dir::remove_tree(&tmp);
        return Err(e);
    }
    let layer = open_layer(dst.as_path())?.ok_or_else(|| {
        Error::io(
            "open shared lower layer",
            dst.as_path(),
            std::io::Error::new(std::io::ErrorKind::NotFound, "vanished once published"),
        )
    })?;
    // The manifest just written is the one on disk: not read back.
    let _ = layer.manifest.set(manifest);
    Ok(layer)
}

/// Removes layers of the store that were being written by a process that is gone (older
/// than an hour: a live writer of a large tree may take minutes, never an hour idle).
fn sweep_abandoned(store: &StateDir) {
    let Ok(names) = store.names() else {
        return;
    };
    let now = std::time::SystemTime::now();
    for n in names {
        let Some(name) = n.to_str() else { continue };
        let Some(id) = name
            .strip_prefix(CREATING_PREFIX)
            .or_else(|| name.strip_prefix(TRASH_PREFIX))
        else {
            continue;
        };
        let old = ulid::Ulid::from_string(id)
            .ok()
            .and_then(|u| now.duration_since(u.datetime()).ok())
            .is_some_and(|age| age > std::time::Duration::from_secs(3600));
        if old || name.starts_with(TRASH_PREFIX) {
            if let Ok(p) = store.join(Path::new(name)) {
                let _ = state_dir::remove_tree(&p);
            }
        }
    }
}

/// Removes the layers of `project` other than `keep` that no process holds and no session
/// directory under `root` names in its `.lower.shared`. Returns how many were removed.
/// Best effort: a layer in use or unreadable is left.
pub fn remove_unused(root: &Path, project: &Path, keep: &Path) -> usize {
    let Ok(store) = open_store(root, project) else {
        return 0;
    };
    remove_unused_in(&store, keep, &named_by_sessions(root))
}

/// Sweeps every project's store under `root` (what `sessions prune` does): layers being
/// written by a process that is gone, and every layer but the newest that no process holds
/// and no session names. The newest layer of a project stays: it is what the project's next
/// session stacks instead of writing the tracked files again; unless the project's path is
/// gone (see [`PROJECT_FILE`]), when it goes too, and the store with its last layer.
/// Returns how many layers were removed. Best effort, like [`remove_unused`].
pub fn sweep(root: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(root.join(STORE_DIR)) else {
        return 0;
    };
    let named = named_by_sessions(root);
    let mut removed = 0;
    for e in rd.filter_map(|e| e.ok()) {
        let is_store = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.len() == 16 && n.bytes().all(|b| b.is_ascii_hexdigit()));
        if !is_store || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(store) = StateDir::open(&e.path()) else {
            continue;
        };
        sweep_abandoned(&store);
        if project_gone(&store) {
            // No layer to keep: an empty path is no layer's.
            removed += remove_unused_in(&store, Path::new(""), &named);
            remove_store_if_empty(&store);
            continue;
        }
        let Ok(names) = store.names() else { continue };
        if let Some(keep) = newest_name(&names).map(|n| store.path().join(n)) {
            removed += remove_unused_in(&store, &keep, &named);
        }
    }
    removed
}

/// Whether the store's [`PROJECT_FILE`] names a path that no longer exists (a store
/// without one, or whose file cannot be read, is taken as serving a live project).
fn project_gone(store: &StateDir) -> bool {
    let Ok(p) = store.join(Path::new(PROJECT_FILE)) else {
        return false;
    };
    let Ok(bytes) = std::fs::read(p.as_path()) else {
        return false;
    };
    let project = Path::new(std::ffi::OsStr::from_bytes(&bytes));
    project.is_absolute()
        && matches!(std::fs::symlink_metadata(project),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Removes a store left with no layer (nor one being written): its project file, then the
/// directory. Anything else in it keeps it.
fn remove_store_if_empty(store: &StateDir) {
    let Ok(names) = store.names() else { return };
    if names.iter().any(|n| n != PROJECT_FILE) {
        return;
    }
    if let Ok(p) = store.join(Path::new(PROJECT_FILE)) {
        let _ = state_dir::remove_file(&p);
    }
    let _ = std::fs::remove_dir(store.path());
}

/// [`remove_unused`] in an open store, given the layers the sessions name.
fn remove_unused_in(store: &StateDir, keep: &Path, named: &[PathBuf]) -> usize {
    let mut removed = 0;
    let Ok(names) = store.names() else {
        return 0;
    };
    for n in names {
        let Some(name) = n.to_str() else { continue };
        if !is_ulid(name) {
            continue;
        }
        let dir = store.path().join(name);
        if dir == keep || named.iter().any(|p| p.starts_with(&dir)) {
            continue;
        }
        let mpath = dir.join(MANIFEST_FILE);
        let Ok(f) = File::open(&mpath) else { continue };
        let locked = rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        // Looked at once locked: a holder registers while holding the layer (shared).
        if locked.is_err() || held(&dir) {
            continue;
        }
        let (Ok(from), Ok(to)) = (
            store.join(Path::new(name)),
            store.join(Path::new(&format!("{TRASH_PREFIX}{name}"))),
        ) else {
            continue;
        };
        if state_dir::rename(&from, &to).is_ok() {
            drop(f);
            let _ = state_dir::remove_tree(&to);
            removed += 1;
        }
    }
    removed
}

/// The shared layers named by the session directories under `root`.
fn named_by_sessions(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(is_ulid))
        .filter_map(|e| std::fs::read(e.path().join(SHARED_LOWER_FILE)).ok())
        .map(|b| PathBuf::from(std::ffi::OsStr::from_bytes(&b)))
        .collect()
}

/// The shared layer a session directory names (`.lower.shared`), if any. Only a layer of
/// the store of the root the session is in (`<root>/lowers/<key>/<ulid>/tree`) is taken, so
/// a damaged record never stacks an arbitrary directory into a sandbox; such a record gives
/// a path that does not exist, so mounting (and recovery) fails with the layer named as
/// missing rather than showing a view without the layer's files.
pub fn named_by(session: &Path) -> Option<PathBuf> {
    let b = std::fs::read(session.join(SHARED_LOWER_FILE)).ok()?;
    let p = PathBuf::from(std::ffi::OsStr::from_bytes(&b));
    let valid = || -> Option<()> {
        let store = session.parent()?.join(STORE_DIR).canonicalize().ok()?;
        let real = p.canonicalize().ok()?;
        let rel = real.strip_prefix(&store).ok()?;
        let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
        (parts.len() == 3 && parts[1].to_str().is_some_and(is_ulid) && parts[2] == TREE_DIR)
            .then_some(())
    };
    match valid() {
        Some(()) => Some(p),
        None => Some(session.join(format!("{}.invalid", SHARED_LOWER_FILE))),
    }
}

/// Whether `name` is a ULID: a published layer's name, or a session directory's.
fn is_ulid(name: &str) -> bool {
    name.len() == 26 && ulid::Ulid::from_string(name).is_ok()
}

/// Records `holder` (a directory outside the session directories, such as a plan's
/// snapshot) as using `layer`: the sweep keeps the layer while that directory exists. Called
/// while the layer is held, so no sweep removes it meanwhile; `holder` may be made after.
pub fn hold_for(layer: &SharedLayer, holder: &Path) -> Result<()> {
    super::holders::record(&layer.dir.join(HOLDERS_DIR), holder)
}

/// Whether a directory recorded by [`hold_for`] in the layer at `dir` still exists (a
/// holder file that cannot be read counts as holding: the layer is kept, never guessed
/// unused).
fn held(dir: &Path) -> bool {
    super::holders::held(&dir.join(HOLDERS_DIR), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &[u8], executable: bool, secs: i64, nanos: i64) -> ManifestFile {
        ManifestFile {
            path: path.to_vec(),
            executable,
            oid: ObjectId::from_bytes([0xab; 20]),
            mtime: Timestamp::new(secs, nanos),
        }
    }

    /// Paths with spaces and any byte but NUL, and times before the epoch, come back as
    /// they were written.
    #[test]
    fn decode_reads_back_what_encode_wrote() {
        let m = Manifest {
            files: vec![
                file(b"a b  c", true, 0, 0),
                file(b"d/\xff\x01 e", false, -5, 999_999_999),
                file(b"y", false, i64::MIN, 0),
                file(b"z", false, i64::MAX, 1),
            ],
        };
        assert_eq!(Manifest::decode(&m.encode()), Some(m));
        let empty = Manifest { files: vec![] };
        assert_eq!(Manifest::decode(&empty.encode()), Some(empty));
    }

    /// A damaged record, a wrong magic line or paths out of order make the bytes no
    /// manifest.
    #[test]
    fn decode_refuses_what_is_not_a_manifest() {
        let good = Manifest {
            files: vec![file(b"a", false, 1, 2), file(b"b", true, 3, 4)],
        }
        .encode();
        assert!(Manifest::decode(&good).is_some());
        let rec = |s: &str| [MAGIC, s.as_bytes(), b"\0"].concat();
        let hex = "ab".repeat(20);
        assert!(Manifest::decode(&rec(&format!("- {hex} 1 2 p"))).is_some());
        for bad in [
            format!("? {hex} 1 2 p"),
            format!("-  {hex} 1 2 p"),
            format!("- {} 1 2 p", &hex[..38]),
            format!("- {}zz 1 2 p", &hex[..38]),
            format!("- {hex} x 2 p"),
            format!("- {hex} 1 2.5 p"),
            format!("- {hex} - 2 p"),
            format!("- {hex} 1 --2 p"),
            format!("- {hex} 99999999999999999999 2 p"),
            format!("- {hex} 1 2 "),
            format!("- {hex} 1 2"),
            format!("- {hex}"),
            "-".to_string(),
        ] {
            assert_eq!(Manifest::decode(&rec(&bad)), None, "{bad:?}");
        }
        assert_eq!(Manifest::decode(&good[1..]), None);
        let unsorted = [MAGIC, format!("- {hex} 1 2 b\0- {hex} 1 2 a\0").as_bytes()].concat();
        assert_eq!(Manifest::decode(&unsorted), None);
    }
}
