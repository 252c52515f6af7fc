//! Reading an upper layer: what a mounted overlay's writes changed, without walking the view.
//!
//! An upper layer holds only what was written: files and symlinks created or copied up,
//! directories (opaque when they replaced a lower directory), and whiteouts for deletions —
//! character devices 0/0 from the kernel (and from `fuse-overlayfs` run as root),
//! `.wh.<name>` files and `.wh..wh..opq` markers from `fuse-overlayfs` without privileges.
//! [`scan`] turns that into three path sets; what a path is now is always read from the view.
//!
//! Invariant: `.git` directories are never entered (as the copy path's listing never
//! enters them), so a sandbox's private repository is never part of a change set.

use std::collections::BTreeSet;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::FileType;

use super::fingerprint::{Fingerprint, Recorder};
use super::walk::{self, Next};
use crate::error::Result;

/// What an upper layer says changed (paths relative to the layer's root, as bytes).
#[derive(Default, Debug, Clone)]
pub struct UpperScan {
    /// Files, symlinks and other non-directories written in the view.
    pub present: BTreeSet<Vec<u8>>,
    /// Paths whose lower node (if any) is hidden: whiteouts, and directories that replaced
    /// a lower file.
    pub hidden: BTreeSet<Vec<u8>>,
    /// Directories whose lower nodes below are hidden (opaque directories, whiteouts, files
    /// that replaced a lower directory); the empty path is the root.
    pub hidden_below: BTreeSet<Vec<u8>>,
    /// A directory with a redirect (a renamed lower directory) was found: the upper layer
    /// alone does not tell what changed.
    pub redirected: bool,
}

impl UpperScan {
    /// Adds another layer's scan: a path any layer touched is a suspect.
    pub fn merge(&mut self, other: UpperScan) {
        self.present.extend(other.present);
        self.hidden.extend(other.hidden);
        self.hidden_below.extend(other.hidden_below);
        self.redirected |= other.redirected;
    }
}

/// `dir/name` as bytes (`name` alone at the root).
pub fn join_rel(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut rel = Vec::with_capacity(dir.len() + 1 + name.len());
    if !dir.is_empty() {
        rel.extend_from_slice(dir);
        rel.push(b'/');
    }
    rel.extend_from_slice(name);
    rel
}

/// Whether a directory entry with this metadata is a kernel whiteout (a 0/0 char device).
pub fn is_whiteout(m: &std::fs::Metadata) -> bool {
    whiteout(m.mode(), m.rdev())
}

/// [`is_whiteout`] from an entry's mode and device number.
fn whiteout(mode: u32, rdev: u64) -> bool {
    FileType::from_raw_mode(mode) == FileType::CharacterDevice && rdev == 0
}

/// Walks the upper layer `upper`. `fuse`: `fuse-overlayfs`'s `.wh.<name>` whiteouts and
/// `.wh..wh..opq` opaque markers count too.
pub fn scan(upper: &Path, fuse: bool) -> Result<UpperScan> {
    walk(upper, fuse, None)
}

/// [`scan`], and the layer's [`Fingerprint`] from the same stat data (`None` when racy):
/// every entry is stat'ed before anything in it is read, so a write after the scan shows
/// in a fingerprint taken later. One walk instead of two for a commit's check.
pub fn scan_fingerprinted(upper: &Path, fuse: bool) -> Result<(UpperScan, Option<Fingerprint>)> {
    let mut rec = Recorder::new();
    let scan = walk(upper, fuse, Some(&mut rec))?;
    Ok((scan, rec.finish()))
}

fn walk(upper: &Path, fuse: bool, mut rec: Option<&mut Recorder>) -> Result<UpperScan> {
    let mut scan = UpperScan::default();
    if let Some(rec) = rec.as_deref_mut() {
        rec.add(Vec::new(), &super::fingerprint::root_stat(upper)?);
    }
    if is_opaque(upper) {
        scan.hidden_below.insert(Vec::new());
    }
    walk::walk(upper, &mut |e| {
        let (rel, name) = (e.rel, e.name);
        let is_dir = e.is_dir();
        if let Some(rec) = rec.as_deref_mut() {
            // Every entry, whiteout markers too, as `fingerprint` has them; not `.git`.
            if !(is_dir && name == b".git") {
                rec.add(rel.to_vec(), e.stat);
            }
        }
        let dir_of = |rel: &[u8]| {
            rel[..rel.len() - name.len()]
                .strip_suffix(b"/")
                .unwrap_or(b"")
                .to_vec()
        };
        if fuse && name.starts_with(b".wh.") {
            if name == b".wh..wh..opq" {
                scan.hidden_below.insert(dir_of(rel));
            } else if name.len() > 4 {
                let hidden = join_rel(&dir_of(rel), &name[4..]);
                scan.hidden.insert(hidden.clone());
                scan.hidden_below.insert(hidden);
            }
            return Ok(Next::Skip);
        }
        if is_dir {
            if name == b".git" {
                return Ok(Next::Skip);
            }
            scan.hidden.insert(rel.to_vec());
            // One listing of its attribute names instead of a lookup per name: most
            // directories of an upper layer carry none of the ones asked about.
            if let Some(fd) = e.dir {
                let names = xattr_names_fd(fd);
                let has = |n: &str| names.as_ref().is_none_or(|l| has_name(l, n));
                if OPAQUE
                    .iter()
                    .any(|n| has(n) && fxattr(fd, n).is_some_and(|v| v.first() == Some(&b'y')))
                {
                    scan.hidden_below.insert(rel.to_vec());
                }
                if has(REDIRECT) && fxattr(fd, REDIRECT).is_some() {
                    scan.redirected = true;
                }
            }
            return Ok(Next::Descend);
        }
        if whiteout(e.stat.st_mode, e.stat.st_rdev) {
            scan.hidden.insert(rel.to_vec());
            scan.hidden_below.insert(rel.to_vec());
        } else {
            scan.hidden_below.insert(rel.to_vec());
            scan.present.insert(rel.to_vec());
        }
        Ok(Next::Skip)
    })?;
    Ok(scan)
}

/// The names of the extended attributes of the file open as `fd` (NUL-separated); `None`
/// when they cannot be listed (the caller then asks for each name).
fn xattr_names_fd(fd: BorrowedFd<'_>) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 512];
    loop {
        match rustix::fs::flistxattr(fd, &mut buf[..]) {
            Ok(n) => {
                buf.truncate(n);
                return Some(buf);
            }
            // The list grew past the buffer: ask for its size and try again.
            Err(rustix::io::Errno::RANGE) => {
                let need = rustix::fs::flistxattr_query(fd).ok()?;
                buf = vec![0u8; need + 64];
            }
            Err(_) => return None,
        }
    }
}

/// An extended attribute of the file open as `fd`, `None` when absent.
fn fxattr(fd: BorrowedFd<'_>, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let n = rustix::fs::fgetxattr(fd, name, &mut buf[..]).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// The attributes that mark a directory opaque: the kernel's (privileged and `userxattr`
/// mounts) and `fuse-overlayfs`'s.
const OPAQUE: [&str; 3] = [
    "trusted.overlay.opaque",
    "user.overlay.opaque",
    "user.fuseoverlayfs.opaque",
];

/// The attribute of a directory that a rename of a lower directory leaves (`redirect_dir`).
const REDIRECT: &str = "trusted.overlay.redirect";

/// Whether `dir` is marked opaque (by the kernel or by `fuse-overlayfs`).
pub fn is_opaque(dir: &Path) -> bool {
    OPAQUE.iter().any(|n| opaque_value(dir, n))
}

/// Whether attribute `name` of `dir` says opaque (`y`).
fn opaque_value(dir: &Path, name: &str) -> bool {
    xattr(dir, name).is_some_and(|v| v.first() == Some(&b'y'))
}

/// Whether the NUL-separated name list `list` holds `name`.
fn has_name(list: &[u8], name: &str) -> bool {
    list.split(|&b| b == 0).any(|n| n == name.as_bytes())
}

/// An extended attribute of `path` itself (never followed), `None` when absent.
pub fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let n = rustix::fs::lgetxattr(path, name, &mut buf[..]).ok()?;
    buf.truncate(n);
    Some(buf)
}
