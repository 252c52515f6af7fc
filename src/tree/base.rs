//! The base snapshot: the pre-image of every node, and where each one's content lives.
//!
//! Copying a large project costs what it holds, so the base does not copy what it can read
//! back unchanged. A tracked file whose stat data matches the git index (by git's own rule,
//! racy entries excluded) has exactly the content of the blob the index names, and that blob
//! is in the user's object store. Such a node is a [`BaseSrc::Blob`]: not copied into
//! `base/`, read from the object store (read-only) when its content is needed. Everything
//! else — untracked files, modified tracked files, symlinks, projects outside git — is
//! copied into `base/` ([`BaseSrc::Dir`]).
//!
//! The pre-images of files a patch touches are materialized into `base/` at finalize, so a
//! consumer reading `base_dir` finds every file it needs to merge. The blob list is also
//! written to `base.blobs` in the session, so crash recovery can rebuild the base.

use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::fs::state_dir::{self, StatePath};
use crate::git::index::LStat;
use crate::git::odb::ObjectStore;
use crate::git::oid::{from_hex, push_hex, ObjectId};
use crate::tree::diff::{read_node, BaseSource};
use crate::tree::snapshot::{Node, NodeKind};

/// Name of the blob list in a session directory.
pub const BLOBS_FILE: &str = "base.blobs";

/// Where a base node's content lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseSrc {
    /// A copy in `base/`.
    Dir,
    /// A blob in the project's object store; `LStat` is the project file's stat data when
    /// it was verified against the index, used to re-verify it before copying from it again.
    Blob(ObjectId, LStat),
}

/// The session's base snapshot.
pub struct Base {
    /// The `base/` directory.
    pub dir: PathBuf,
    /// Every node, sorted by path bytes.
    pub nodes: Vec<Node>,
    /// Where each node's content lives (parallel to `nodes`).
    pub srcs: Vec<BaseSrc>,
    /// The project's object store, when any node is a blob.
    pub odb: Option<Arc<ObjectStore>>,
    /// The project directory: a blob node whose project file still has the stat data
    /// verified at snapshot time is read from there (no pack decompression). `None` in
    /// recovery, where only the object store is trusted.
    pub project: Option<PathBuf>,
}

impl Base {
    /// Finds a node by path.
    pub fn position(&self, rel: &RelPath) -> Option<usize> {
        self.nodes
            .binary_search_by(|n| n.rel.as_bytes().cmp(rel.as_bytes()))
            .ok()
    }

    /// The base version of `rel` (its kind and content), or `None` when `rel` is not in the
    /// base: what a pending patch keeps as its pre-image.
    pub fn preimage(&self, rel: &RelPath) -> Result<Option<(NodeKind, Vec<u8>)>> {
        match self.position(rel) {
            Some(i) => Ok(Some((self.nodes[i].kind, BaseSource::read(self, i)?))),
            None => Ok(None),
        }
    }

    /// Reads node `i` from the object store, or `None` if it lives in `base/`.
    fn read_blob(&self, i: usize) -> Result<Option<Vec<u8>>> {
        let BaseSrc::Blob(oid, st) = self.srcs[i] else {
            return Ok(None);
        };
        if let Some(d) = self.read_unchanged_project_file(i, &st) {
            return Ok(Some(d));
        }
        let odb = self.odb.as_ref().ok_or_else(|| Error::Git {
            path: self.dir.clone(),
            reason: "base node refers to a blob but no object store is open".into(),
        })?;
        match odb.read_blob(&oid)? {
            Some(d) => Ok(Some(d)),
            None => Err(Error::Git {
                path: self.dir.join(self.nodes[i].rel.as_path()),
                reason: format!("blob {oid} is no longer in the object store"),
            }),
        }
    }

    /// The project's copy of node `i` when its stat data, before and after reading, is still
    /// the one verified against the index at snapshot time (so its content is the blob).
    fn read_unchanged_project_file(&self, i: usize, st: &LStat) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut f = self.open_unchanged_project_file(i, st)?;
        let mut data = Vec::with_capacity(st.size as usize);
        f.read_to_end(&mut data).ok()?;
        (still_unchanged(&f, st) && data.len() as u64 == st.size).then_some(data)
    }

    /// The project's file for node `i`, opened, when its stat data is the verified one.
    fn open_unchanged_project_file(&self, i: usize, st: &LStat) -> Option<fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let p = self.project.as_ref()?.join(self.nodes[i].rel.as_path());
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p)
            .ok()?;
        still_unchanged(&f, st).then_some(f)
    }

    /// Makes sure the pre-image of node `i` exists as a file in `base/` (for consumers that
    /// merge against `base_dir`). Safe to race: written to a temporary file in `scratch` (a
    /// directory of the session outside `base/`, so a crash leaves nothing in `base/` that
    /// could be taken for a project file), then renamed into place.
    pub fn materialize(&self, base_dir: &StatePath, scratch: &StatePath, i: usize) -> Result<()> {
        let node = &self.nodes[i];
        let dst = base_dir.child(&node.rel);
        if state_dir::exists(&dst)? {
            return Ok(());
        }
        let BaseSrc::Blob(_, st) = self.srcs[i] else {
            return Ok(());
        };
        if let Some(parent) = node.rel.parent() {
            state_dir::create_dir_all(&base_dir.child(&parent))?;
        }
        let mode = match node.kind {
            NodeKind::File { executable: true } => 0o755,
            _ => 0o644,
        };
        // An unchanged project file is copied in the kernel (copy_file_range), never held
        // in memory: a multi-megabyte file costs no resident memory here.
        if let Some(src) = self.open_unchanged_project_file(i, &st) {
            let copied = state_dir::write_file_replace_via(&dst, scratch, mode, |f, tmp| {
                std::io::copy(&mut &src, f).ctx("copy", tmp)?;
                Ok(still_unchanged(&src, &st))
            })?;
            if copied {
                return Ok(());
            }
        }
        let Some(data) = self.read_blob(i)? else {
            return Ok(());
        };
        state_dir::write_file_replace_via(&dst, scratch, mode, |f, tmp| {
            f.write_all(&data).ctx("write", tmp)?;
            Ok(true)
        })
        .map(|_| ())
    }

    /// Like [`Self::materialize`], but when `layer_file` is node `i`'s copy in an immutable
    /// layer (an overlay session's `.lower/`, or the shared layer under it), the pre-image
    /// becomes a hard link to that copy: no data is copied and no inode made, where a copy
    /// of a 24 MB header took most of an overlay finalize on ext4. A layer file that does
    /// not look like the node (not a regular file, another size or executable bit) or that
    /// cannot be linked (another filesystem, a link count at its limit) is passed over for
    /// the copy. The link shares the layer's inode, which `base/` never writes in place:
    /// `base_dir` is the snapshot, read by consumers, never written by them.
    pub fn materialize_linked(
        &self,
        base_dir: &StatePath,
        scratch: &StatePath,
        i: usize,
        layer_file: Option<&Path>,
    ) -> Result<()> {
        if let Some(src) = layer_file {
            if self.link_preimage(base_dir, i, src)? {
                return Ok(());
            }
        }
        self.materialize(base_dir, scratch, i)
    }

    /// Links `src` into `base/` as node `i`'s pre-image; `false` when it was not linked.
    fn link_preimage(&self, base_dir: &StatePath, i: usize, src: &Path) -> Result<bool> {
        use std::os::unix::fs::PermissionsExt;
        let node = &self.nodes[i];
        let (BaseSrc::Blob(_, st), NodeKind::File { executable }) = (self.srcs[i], node.kind)
        else {
            return Ok(false);
        };
        let Ok(m) = fs::symlink_metadata(src) else {
            return Ok(false);
        };
        if !m.file_type().is_file()
            || m.len() != st.size
            || (m.permissions().mode() & 0o100 != 0) != executable
        {
            return Ok(false);
        }
        if let Some(parent) = node.rel.parent() {
            state_dir::create_dir_all(&base_dir.child(&parent))?;
        }
        // Already there (`Ok(false)`): an earlier finalize made it.
        Ok(state_dir::link_new(src, &base_dir.child(&node.rel)).is_ok())
    }

    /// Writes `base.blobs`: one line per blob node, `<hex oid> <git mode> <hex path> <size>`
    /// (the size lets recovery compare without reading; lists from before it had no size).
    pub fn write_blob_list(&self, p: &StatePath) -> Result<()> {
        // Through a buffer of its own size, with no string or formatter per line: the list of
        // a large tree has ~100k lines (11 MB on the Linux tree), and a buffer of its whole
        // size cost its page faults and as much peak memory.
        state_dir::write_scratch_streamed(p, |f| {
            let mut w = std::io::BufWriter::with_capacity(1 << 18, f);
            let mut line = Vec::with_capacity(256);
            for (n, s) in self.nodes.iter().zip(&self.srcs) {
                if let BaseSrc::Blob(oid, st) = s {
                    line.clear();
                    push_hex(oid.as_bytes(), &mut line);
                    line.extend_from_slice(match n.kind {
                        NodeKind::File { executable: true } => b" 100755 ",
                        NodeKind::File { executable: false } => b" 100644 ",
                        NodeKind::Symlink => b" 120000 ",
                    });
                    push_hex(n.rel.as_bytes(), &mut line);
                    line.push(b' ');
                    push_decimal(st.size, &mut line);
                    line.push(b'\n');
                    w.write_all(&line)?;
                }
            }
            w.flush()
        })
    }

    /// Rebuilds a base from a session directory after a crash: `base/` plus `base.blobs`,
    /// reading blobs from `git_dir`'s object store.
    pub fn load(session_dir: &Path, dir: PathBuf, git_dir: Option<&Path>) -> Result<Base> {
        let mut nodes: Vec<(Node, BaseSrc)> = crate::tree::snapshot::list_tree(&dir)?
            .into_iter()
            .map(|(n, _)| (n, BaseSrc::Dir))
            .collect();
        let list = session_dir.join(BLOBS_FILE);
        let text = match fs::read(&list) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io("read", &list, e)),
        };
        let bad = || Error::Git {
            path: list.clone(),
            reason: "malformed blob list".into(),
        };
        let have: std::collections::HashSet<Vec<u8>> = nodes
            .iter()
            .map(|(n, _)| n.rel.as_bytes().to_vec())
            .collect();
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let line = std::str::from_utf8(line).map_err(|_| bad())?;
            let mut parts = line.split(' ');
            let (Some(oid), Some(mode), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            let size = match parts.next() {
                Some(v) => Some(v.parse::<u64>().map_err(|_| bad())?),
                None => None,
            };
            let oid = ObjectId::from_hex(oid).ok_or_else(bad)?;
            let kind = match mode {
                "100755" => NodeKind::File { executable: true },
                "100644" => NodeKind::File { executable: false },
                _ => return Err(bad()),
            };
            let bytes = from_hex(path).ok_or_else(bad)?;
            if have.contains(&bytes) {
                continue; // materialized: the copy in base/ is the same content
            }
            let rel = RelPath::from_bytes(&bytes)?;
            let st = LStat {
                size: size.unwrap_or(u64::MAX),
                ..LStat::default()
            };
            nodes.push((Node { rel, kind }, BaseSrc::Blob(oid, st)));
        }
        nodes.sort_by(|a, b| a.0.rel.as_bytes().cmp(b.0.rel.as_bytes()));
        let any_blob = nodes.iter().any(|(_, s)| matches!(s, BaseSrc::Blob(..)));
        let odb = match (any_blob, git_dir) {
            (true, Some(g)) => Some(Arc::new(ObjectStore::open(g)?)),
            (true, None) => {
                return Err(Error::Git {
                    path: list,
                    reason: "the project's repository is gone; blobs cannot be read".into(),
                })
            }
            _ => None,
        };
        if let Some(odb) = &odb {
            // A list written before sizes were recorded: learn them from the blobs, so the
            // diff never takes an unknown size for a changed file.
            for (_, src) in nodes.iter_mut() {
                if let BaseSrc::Blob(oid, st) = src {
                    if st.size == u64::MAX {
                        let data = odb.read_blob(oid)?.ok_or_else(|| Error::Git {
                            path: list.clone(),
                            reason: format!("blob {oid} is missing"),
                        })?;
                        st.size = data.len() as u64;
                    }
                }
            }
        }
        let (nodes, srcs) = nodes.into_iter().unzip();
        Ok(Base {
            dir,
            nodes,
            srcs,
            odb,
            project: None,
        })
    }
}

impl BaseSource for Base {
    fn read(&self, i: usize) -> Result<Vec<u8>> {
        match self.read_blob(i)? {
            Some(d) => Ok(d),
            None => {
                let n = &self.nodes[i];
                read_node(&self.dir.join(n.rel.as_path()), n.kind)
            }
        }
    }

    fn blob_id(&self, i: usize) -> Option<ObjectId> {
        // A blob node's content is the blob, whether read from the project (stat data
        // verified) or from the object store.
        match self.srcs.get(i) {
            Some(BaseSrc::Blob(oid, _)) => Some(*oid),
            _ => None,
        }
    }

    fn open_file(&self, i: usize) -> Option<fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        match (&self.srcs[i], self.nodes[i].kind) {
            (BaseSrc::Blob(_, st), _) => self.open_unchanged_project_file(i, st),
            (BaseSrc::Dir, NodeKind::File { .. }) => fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(self.dir.join(self.nodes[i].rel.as_path()))
                .ok(),
            _ => None,
        }
    }

    fn still_same(&self, i: usize, f: &fs::File) -> bool {
        match &self.srcs[i] {
            BaseSrc::Blob(_, st) => still_unchanged(f, st),
            // `base/` is the session's own copy: never written after the snapshot.
            BaseSrc::Dir => true,
        }
    }

    fn size(&self, i: usize) -> Option<u64> {
        match self.srcs[i] {
            BaseSrc::Blob(_, st) => Some(st.size),
            BaseSrc::Dir => fs::symlink_metadata(self.dir.join(self.nodes[i].rel.as_path()))
                .ok()
                .map(|m| m.len()),
        }
    }
}

/// Reads a symlink target as bytes (helper for callers that build pre-images).
pub fn link_bytes(p: &Path) -> Result<Vec<u8>> {
    Ok(fs::read_link(p)
        .ctx("read symlink", p)?
        .as_os_str()
        .as_bytes()
        .to_vec())
}

/// Whether the open file still has the stat data `st` (so its content is the verified blob).
fn still_unchanged(f: &fs::File, st: &LStat) -> bool {
    f.metadata()
        .is_ok_and(|m| LStat::from_metadata(&m) == *st && m.len() == st.size)
}

/// Appends `v` in decimal (what `write!(out, "{v}")` writes, without the formatter).
fn push_decimal(mut v: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_what_the_formatter_writes() {
        for v in [0, 7, 9, 10, 99, 100, 4096, 1 << 40, u64::MAX - 1, u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(v, &mut out);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }
}
