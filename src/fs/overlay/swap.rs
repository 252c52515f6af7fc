//! Replacing an idle kernel overlay by another on the same mount point, with the window in
//! which the mount point shows no overlay kept to a few system calls.
//!
//! A chained sandbox stacks its predecessor's upper layer, and OverlayFS forbids changing a
//! lower layer under a mount; instead of copying that layer, the caller turns it into a
//! lower layer of both: it [`prepare`]s the predecessor's new overlay (the mount API's
//! `fsopen`/`fsconfig`, nothing created yet), takes the old one down with
//! [`unmount_if_idle`] (a plain unmount: the kernel refuses it with `EBUSY` while anyone has
//! a file, a working directory or a mount below it, which is the proof that nobody is
//! using it), renames what it must, then [`attach`]es the new one (`FSCONFIG_CMD_CREATE`,
//! `fsmount`, `move_mount`). The new overlay's superblock is only created once the old one is
//! gone, so no directory is ever the upper layer of one overlay and a layer of another.
//!
//! Every layer is given to the kernel as an `O_PATH` descriptor opened by [`prepare`]
//! (`/proc/self/fd/N`): the directories renamed between [`prepare`] and [`attach`] are
//! mounted as they were opened, whatever their names have become.
//!
//! The window: between the unmount and the `move_mount`, the mount point is the bare empty
//! directory under it (a lookup there finds nothing; a file created there would be hidden by
//! the new mount). No process can be inside it (the unmount proved it), so only a path walk
//! that starts during those system calls sees it. The unmount itself writes back the upper
//! layer's filesystem once the mount is gone (the kernel syncs an overlay's upper filesystem
//! when its superblock ends), so the caller writes it back first
//! ([`sync_filesystem_of`]), leaving the unmount only what was written since.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::FileType;
use rustix::io::Errno;
use rustix::mount::{
    fsconfig_create, fsconfig_set_string, fsmount, fsopen, move_mount, unmount, FsMountFlags,
    FsOpenFlags, MountAttrFlags, MoveMountFlags, UnmountFlags,
};

use super::mount::Layers;
use super::walk::Next;
use crate::error::{Error, Result};
use crate::fs::at;

/// A kernel overlay configured but not created yet (see the module docs).
#[derive(Debug)]
pub struct Prepared {
    /// The filesystem context (`fsopen`).
    fs: OwnedFd,
    /// The layers' directories, open, so that the context mounts these very directories.
    _pins: Vec<OwnedFd>,
}

fn open_path(p: &Path) -> Result<OwnedFd> {
    at::hold_dir(at::CWD, p).map_err(|e| Error::io("open overlay layer", p, e.into()))
}

/// Configures a kernel overlay of `layers` (the same options as
/// [`super::mount::mount`]'s), each layer pinned by a descriptor; nothing is mounted.
pub fn prepare(layers: &Layers) -> Result<Prepared> {
    let at = |e: Errno, what: &'static str| Error::io(what, &layers.upper, e.into());
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC)
        .map_err(|e| at(e, "open the overlay filesystem"))?;
    let mut pins = Vec::with_capacity(layers.lower.len() + 2);
    let mut via = |p: &Path| -> Result<String> {
        let fd = open_path(p)?;
        let s = format!("/proc/self/fd/{}", fd.as_raw_fd());
        pins.push(fd);
        Ok(s)
    };
    let mut lower = Vec::with_capacity(layers.lower.len());
    for l in &layers.lower {
        lower.push(via(l)?);
    }
    let upper = via(&layers.upper)?;
    let work = via(&layers.work)?;
    let set = |k: &str, v: &str| {
        fsconfig_set_string(fs.as_fd(), k, v).map_err(|e| at(e, "configure the overlay filesystem"))
    };
    set("lowerdir", &lower.join(":"))?;
    set("upperdir", &upper)?;
    set("workdir", &work)?;
    set("metacopy", "off")?;
    set("index", "off")?;
    set(
        "redirect_dir",
        if layers.rename_dirs { "on" } else { "off" },
    )?;
    Ok(Prepared { fs, _pins: pins })
}

/// Whether the upper layer `upper` holds a regular file with more than one link (`.git` at its
/// root aside). A hard link made through an overlay lives whole in its upper layer; were
/// that layer to become a lower one, the next write through one name would copy that name
/// up alone (OverlayFS breaks lower hard links on copy-up without `index=on`) and the other
/// names would no longer see the writes. Such a layer is not swapped.
pub fn has_hard_links(upper: &Path) -> Result<bool> {
    super::walk::walk(upper, &mut |e| {
        Ok(if e.is_dir() {
            if e.top && e.name == b".git" {
                Next::Skip
            } else {
                Next::Descend
            }
        } else if FileType::from_raw_mode(e.stat.st_mode) == FileType::RegularFile
            && e.stat.st_nlink > 1
        {
            Next::Stop
        } else {
            Next::Skip
        })
    })
}

/// Writes back the filesystem holding `dir` (`syncfs`). Unmounting an overlay writes back its
/// upper layer's whole filesystem while the mount point already shows nothing: called just
/// before [`unmount_if_idle`], it leaves that write-back little to do, and the window short.
pub fn sync_filesystem_of(dir: &Path) -> Result<()> {
    let fd = at::open_path_dir_nofollow(dir).map_err(|e| Error::io("open", dir, e.into()))?;
    at::syncfs(fd.as_fd()).map_err(|e| Error::io("write back the filesystem of", dir, e.into()))
}

/// Unmounts what is mounted on `mnt` unless it is in use: `Ok(false)` (and nothing
/// changed) when the kernel refuses with `EBUSY`. Never lazy.
pub fn unmount_if_idle(mnt: &Path) -> Result<bool> {
    match unmount(mnt, UnmountFlags::NOFOLLOW) {
        Ok(()) => Ok(true),
        Err(Errno::BUSY) => Ok(false),
        Err(e) => Err(Error::io("unmount", mnt, e.into())),
    }
}

/// Creates the overlay `p` configures and mounts it on `mnt` (a real directory, opened
/// without following a symlink; the mount goes where that descriptor is).
pub fn attach(p: Prepared, mnt: &Path) -> Result<()> {
    let at = |e: Errno, what: &'static str| Error::io(what, mnt, e.into());
    fsconfig_create(p.fs.as_fd()).map_err(|e| at(e, "create the overlay"))?;
    let m = fsmount(
        p.fs.as_fd(),
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
    )
    .map_err(|e| at(e, "make the overlay mount"))?;
    let target = open_path(mnt)?;
    move_mount(
        m.as_fd(),
        "",
        target.as_fd(),
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
    .map_err(|e| at(e, "attach the overlay mount"))?;
    // Renamed since it was opened: taken down where it went, refused.
    let now = std::fs::read_link(format!("/proc/self/fd/{}", target.as_raw_fd()));
    if now.as_deref().is_ok_and(|n| n != mnt) {
        if let Ok(n) = now {
            let _ = unmount(&n, UnmountFlags::NOFOLLOW | UnmountFlags::DETACH);
        }
        return Err(Error::io(
            "attach the overlay mount",
            mnt,
            std::io::Error::other("the mount point was renamed while it was mounted on"),
        ));
    }
    Ok(())
}
