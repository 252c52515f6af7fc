//! Frozen layers: copies of upper layers that a chained overlay stacks as lower layers.
//!
//! OverlayFS forbids changing a lower layer under a mount, and a predecessor keeps writing
//! its upper layer after a chained sandbox is made from it; so the chained sandbox stacks a
//! frozen copy of it (unless the predecessor is idle and lends the layer itself, see
//! [`super::swap`]). An upper layer holds only what changed, so the copy is small.
//! [`merge`] also collapses a stack of frozen layers into one (when a chain outgrows what
//! the kernel can stack): applied bottom to top, each layer's whiteouts and opaque
//! directories replace what the layers below had, and are kept, since they must still hide
//! the session's base below.
//!
//! Files are copied (reflinked where the filesystem shares blocks) with their mode and
//! times; directories, whiteouts and extended attributes (the opaque markers) are made
//! anew. `.git` at the layer's root is never copied: a sandbox's private repository is its
//! own and is no part of its successor.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::upper::{is_opaque, is_whiteout};
use crate::error::{Error, IoContext, Result};
use crate::fs::at;
use crate::fs::state_dir::StatePath;

/// Applies the layer `src` over the layer `dst` (an existing directory of the session;
/// empty to make a frozen copy): afterwards `dst` stacked alone shows what `src` stacked
/// over the old `dst` showed.
pub fn merge(src: &Path, dst: &StatePath) -> Result<()> {
    merge_dir(src, dst.as_path(), true)
}

fn merge_dir(src: &Path, dst: &Path, root: bool) -> Result<()> {
    let rd = std::fs::read_dir(src).ctx("read directory", src)?;
    for entry in rd {
        let entry = entry.ctx("read directory", src)?;
        let name = entry.file_name();
        if root && name == ".git" {
            continue;
        }
        let from = entry.path();
        let to = dst.join(&name);
        let m = std::fs::symlink_metadata(&from).ctx("stat", &from)?;
        let existing = std::fs::symlink_metadata(&to).ok();
        if m.is_dir() {
            let opaque = is_opaque(&from);
            match &existing {
                Some(e) if e.is_dir() && !opaque => {}
                Some(_) => {
                    remove_any(&to)?;
                    make_dir(&from, &to, &m)?;
                }
                None => make_dir(&from, &to, &m)?,
            }
            merge_dir(&from, &to, false)?;
        } else {
            if existing.is_some() {
                remove_any(&to)?;
            }
            copy_node(&from, &to, &m)?;
        }
    }
    Ok(())
}

fn remove_any(p: &Path) -> Result<()> {
    let m = std::fs::symlink_metadata(p).ctx("stat", p)?;
    if m.is_dir() {
        std::fs::remove_dir_all(p).ctx("remove", p)
    } else {
        std::fs::remove_file(p).ctx("remove", p)
    }
}

fn make_dir(from: &Path, to: &Path, m: &std::fs::Metadata) -> Result<()> {
    std::fs::create_dir(to).ctx("create directory", to)?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(m.mode() & 0o7777))
        .ctx("chmod", to)?;
    copy_xattrs(from, to)
}

fn copy_node(from: &Path, to: &Path, m: &std::fs::Metadata) -> Result<()> {
    let ft = m.file_type();
    if ft.is_symlink() {
        let target = std::fs::read_link(from).ctx("read symlink", from)?;
        std::os::unix::fs::symlink(&target, to).ctx("create symlink", to)?;
    } else if is_whiteout(m) {
        at::mknod_whiteout(at::CWD, to).map_err(|e| Error::io("make whiteout", to, e.into()))?;
    } else if ft.is_file() {
        std::fs::copy(from, to).ctx("copy", to)?;
        let f = std::fs::File::options()
            .write(true)
            .open(to)
            .ctx("open", to)?;
        let times = std::fs::FileTimes::new()
            .set_modified(m.modified().ctx("stat", from)?)
            .set_accessed(m.accessed().ctx("stat", from)?);
        f.set_times(times).ctx("set times", to)?;
        copy_xattrs(from, to)?;
    }
    // Sockets and FIFOs in an upper layer are no part of any change: not copied.
    Ok(())
}

/// Copies the `trusted.overlay.*` and `user.*` extended attributes (opaque markers among
/// them) of `from` to `to`, neither followed.
fn copy_xattrs(from: &Path, to: &Path) -> Result<()> {
    let mut names = vec![0u8; 1024];
    let n = rustix::fs::llistxattr(from, &mut names[..]).unwrap_or(0);
    if n == 0 {
        return Ok(());
    }
    names.truncate(n);
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        if !(name.starts_with(b"trusted.overlay.") || name.starts_with(b"user.")) {
            continue;
        }
        let Some(value) = super::upper::xattr(from, &String::from_utf8_lossy(name)) else {
            continue;
        };
        let r = rustix::fs::lsetxattr(to, name, &value, rustix::fs::XattrFlags::empty());
        if let Err(e) = r {
            let e = std::io::Error::from(e);
            return Err(Error::io(
                "set extended attribute",
                to,
                std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", OsStr::from_bytes(name).to_string_lossy()),
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frozen copy keeps files, whiteouts and opaque markers; merging a higher layer
    /// replaces what it covers.
    #[test]
    fn merge_applies_a_higher_layer() {
        let t = tempfile::tempdir().unwrap();
        let session = crate::fs::state_dir::StateDir::open(t.path()).unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("d")).unwrap();
        std::fs::write(a.join("d/f"), "1").unwrap();
        std::fs::write(a.join("g"), "1").unwrap();
        std::fs::create_dir_all(a.join(".git")).unwrap();
        std::fs::create_dir_all(b.join("d")).unwrap();
        std::fs::write(b.join("g"), "2").unwrap();
        std::fs::write(b.join("d/.wh.f"), "").unwrap();
        let out = session.join(&t.path().join("out")).unwrap();
        std::fs::create_dir(out.as_path()).unwrap();
        merge(&a, &out).unwrap();
        merge(&b, &out).unwrap();
        let o = out.as_path();
        assert_eq!(std::fs::read(o.join("g")).unwrap(), b"2");
        assert_eq!(std::fs::read(o.join("d/f")).unwrap(), b"1");
        assert!(o.join("d/.wh.f").exists());
        assert!(!o.join(".git").exists());
    }
}
