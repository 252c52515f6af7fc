//! Mounting and unmounting an overlay: the kernel's OverlayFS through mount(2), or a
//! `fuse-overlayfs` process; unmounting through umount2(2) (lazily when busy), or
//! `fusermount -u` for an unprivileged FUSE mount.
//!
//! Only the mount point given is ever mounted or unmounted, and a mount point is refused
//! unless it is an empty real directory that nothing is mounted on.
//!
//! Metadata-only copy-ups would hide changes from a walk of the upper layer, so kernel mounts
//! use `metacopy=off,index=off`. Renaming a lower directory needs `redirect_dir=on`
//! ([`Layers::rename_dirs`]); without it the rename is `EXDEV`, which `mv` and other tools
//! answer by copying (`fuse-overlayfs` always answers so). A redirected directory is found by
//! [`super::upper::scan`], whose caller must then look at the whole view.

use std::ffi::{CString, OsStr};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::mountinfo::is_mounted;
use crate::error::{Error, Result};
use crate::fs::at;

/// How an overlay is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The kernel's OverlayFS (needs `CAP_SYS_ADMIN`).
    Kernel,
    /// A `fuse-overlayfs` process (needs the program and a usable `/dev/fuse`).
    Fuse,
}

/// The environment variable that forces the backend of overlay sandboxes: `kernel`, `fuse`
/// or `copy` (no overlay). Unset or empty: the first available, in that order.
pub const MODE_ENV: &str = "PATCHBOX_OVERLAY_MODE";

/// The kernel's limit on lower layers of one overlay (`OVL_MAX_STACK`).
pub const MAX_LOWER_LAYERS: usize = 500;

/// The mount options of a kernel overlay must fit in one page.
const MAX_OPTIONS: usize = 4095;

/// The layers of one overlay: lower layers top first, the upper and work directories.
#[derive(Clone, Debug)]
pub struct Layers {
    /// Lower layers, top first; at least one.
    pub lower: Vec<PathBuf>,
    /// Where writes land.
    pub upper: PathBuf,
    /// The work directory (same filesystem as `upper`).
    pub work: PathBuf,
    /// Kernel mounts: let a lower directory be renamed (`redirect_dir=on`); off, such a
    /// rename fails with `EXDEV`.
    pub rename_dirs: bool,
}

impl Layers {
    /// The options string both backends take (escaped for the kernel when `kernel`).
    fn options(&self, kernel: bool) -> Vec<u8> {
        let esc = |p: &Path| {
            if kernel {
                escape_opt(p)
            } else {
                p.as_os_str().as_bytes().to_vec()
            }
        };
        let mut data = b"lowerdir=".to_vec();
        for (i, l) in self.lower.iter().enumerate() {
            if i > 0 {
                data.push(b':');
            }
            data.extend(esc(l));
        }
        data.extend_from_slice(b",upperdir=");
        data.extend(esc(&self.upper));
        data.extend_from_slice(b",workdir=");
        data.extend(esc(&self.work));
        data
    }

    /// Whether this many lower layers can be mounted: under the kernel's stack limit, and
    /// the options fit in a page.
    pub fn fits(&self) -> bool {
        self.lower.len() <= MAX_LOWER_LAYERS
            && self.options(true).len() + KERNEL_EXTRA.len() + 20 < MAX_OPTIONS
    }
}

const KERNEL_EXTRA: &[u8] = b",metacopy=off,index=off";

/// A live mount made by [`mount`]: the `fuse-overlayfs` process serving it, if any.
#[derive(Debug)]
pub struct Mounted {
    /// The backend serving it.
    pub backend: Backend,
    /// The FUSE server (for [`Backend::Fuse`]).
    pub server: Option<Child>,
}

/// Whether the process runs as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Mounts `layers` on `mnt` (resolved, an empty directory) with `backend`. A FUSE server's
/// standard error goes to `log`.
///
/// The mount point is opened without following a symlink and mounted through that
/// descriptor ([`mount_on`]): a directory swapped for a symlink after the check is refused,
/// never followed out of where the caller pointed.
pub fn mount(backend: Backend, layers: &Layers, mnt: &Path, log: &Path) -> Result<Mounted> {
    check_mount_point(mnt)?;
    let pinned =
        at::hold_dir(at::CWD, mnt).map_err(|e| Error::io("open mount point", mnt, e.into()))?;
    use std::os::fd::AsFd;
    mount_on(backend, layers, pinned.as_fd(), mnt, log)
}

/// Mounts `layers` with `backend` on the directory open as `pin` (through
/// `/proc/self/fd/N`, so on that directory and no other, wherever it is now), which the
/// caller made empty and expects at `mnt`. Once mounted on, a directory cannot be renamed;
/// if it was renamed before, the mount is undone and the call fails: `Ok` means mounted at
/// `mnt`, `Err` means nothing of this call is mounted anywhere.
pub fn mount_on(
    backend: Backend,
    layers: &Layers,
    pin: std::os::fd::BorrowedFd<'_>,
    mnt: &Path,
    log: &Path,
) -> Result<Mounted> {
    use std::os::fd::AsRawFd;
    let fd = pin.as_raw_fd();
    match backend {
        Backend::Kernel => {
            mount_kernel(layers, Path::new(&format!("/proc/self/fd/{fd}")), mnt)?;
            // Renamed between the check and the mount: unmounted where it went, refused.
            // (Once mounted it cannot be renamed: the check below is stable, and so is the
            // path it gives.)
            if let Some(elsewhere) = moved(fd, mnt) {
                undo_mount(&elsewhere, mnt, None)?;
                return Err(moved_error(mnt));
            }
            Ok(Mounted {
                backend,
                server: None,
            })
        }
        Backend::Fuse => {
            fuse_available()?;
            let via = PathBuf::from(format!("/proc/{}/fd/{fd}", std::process::id()));
            let child = match mount_fuse(layers, &via, fd, mnt, log) {
                Ok(c) => c,
                Err(e) => {
                    // It may have mounted just as it was given up on.
                    let at = moved(fd, mnt).unwrap_or_else(|| mnt.to_path_buf());
                    undo_mount(&at, mnt, None)?;
                    return Err(e);
                }
            };
            if let Some(elsewhere) = moved(fd, mnt) {
                undo_mount(&elsewhere, mnt, Some(child))?;
                return Err(moved_error(mnt));
            }
            Ok(Mounted {
                backend,
                server: Some(child),
            })
        }
    }
}

/// Unmounts a mount [`mount_on`] gives up on from `at` (where the held directory is: `mnt`,
/// or where it was renamed before it was mounted on; stable, since a mount point cannot be
/// renamed) and ends its server: an error names what stays mounted.
fn undo_mount(at: &Path, mnt: &Path, server: Option<Child>) -> Result<()> {
    unmount(at, true, server).map_err(|e| {
        Error::io(
            "undo a mount given up on",
            mnt,
            std::io::Error::other(format!("{e}")),
        )
    })
}

/// Where the directory open as `fd` is now, when that is not `mnt`.
fn moved(fd: std::os::fd::RawFd, mnt: &Path) -> Option<PathBuf> {
    let now = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    (now != mnt).then_some(now)
}

fn moved_error(mnt: &Path) -> Error {
    Error::io(
        "mount the overlay",
        mnt,
        std::io::Error::other("the mount point was renamed while it was mounted on"),
    )
}

/// Unmounts whatever is mounted on `mnt` (lazily when busy) and ends `server`; fails when a
/// mount remains. `fuse`: the mount may be an unprivileged FUSE mount (`fusermount -u`).
pub fn unmount(mnt: &Path, fuse: bool, server: Option<Child>) -> Result<()> {
    let mut tries = 0;
    let mut detached = false;
    while is_mounted(mnt)? {
        tries += 1;
        if tries > 8 {
            return Err(Error::io(
                "unmount",
                mnt,
                std::io::Error::other("a mount remains after unmounting"),
            ));
        }
        if fuse && !is_root() {
            let _ = fusermount(mnt, false);
            if is_mounted(mnt)? {
                detached = fusermount(mnt, true).is_ok();
            }
            continue;
        }
        match umount2(mnt, libc::UMOUNT_NOFOLLOW) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                umount2(mnt, libc::UMOUNT_NOFOLLOW | libc::MNT_DETACH)
                    .map_err(|e| Error::io("detach mount", mnt, e))?;
                detached = true;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => {
                if fuse && fusermount(mnt, false).is_ok() {
                    continue;
                }
                return Err(Error::io("unmount", mnt, e));
            }
        }
    }
    if let Some(mut child) = server {
        if detached {
            // It serves the detached mount until the last open file there is closed.
            std::thread::spawn(move || child.wait());
        } else {
            wait_or_kill(&mut child, Duration::from_secs(5));
        }
    }
    Ok(())
}

/// Refuses a mount point that is not an empty, unmounted, real directory.
pub fn check_mount_point(mnt: &Path) -> Result<()> {
    let refuse = |why: &str| {
        Err(Error::io(
            "mount the overlay",
            mnt,
            std::io::Error::other(format!("refused mount point: {why}")),
        ))
    };
    let m = std::fs::symlink_metadata(mnt).map_err(|e| Error::io("stat", mnt, e))?;
    if !m.file_type().is_dir() {
        return refuse("not a directory");
    }
    if is_mounted(mnt)? {
        return refuse("something is mounted on it");
    }
    let mut rd = std::fs::read_dir(mnt).map_err(|e| Error::io("read directory", mnt, e))?;
    if rd.next().is_some() {
        return refuse("not empty");
    }
    Ok(())
}

/// Escapes a path for OverlayFS's option string (`\`, `,` and `:` are separators).
pub fn escape_opt(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if matches!(b, b'\\' | b',' | b':') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

fn cstr(p: &[u8], what: &'static str, path: &Path) -> Result<CString> {
    CString::new(p).map_err(|_| {
        Error::io(
            what,
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL byte in path"),
        )
    })
}

/// Mounts on `via` (a path naming the mount point's descriptor); `mnt` names it in errors.
fn mount_kernel(layers: &Layers, via: &Path, mnt: &Path) -> Result<()> {
    let mut data = layers.options(true);
    data.extend_from_slice(KERNEL_EXTRA);
    data.extend_from_slice(if layers.rename_dirs {
        b",redirect_dir=on"
    } else {
        b",redirect_dir=off"
    });
    let data = cstr(&data, "mount the overlay", mnt)?;
    let flags = rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV;
    rustix::mount::mount(c"overlay", via, c"overlay", flags, data.as_c_str())
        .map_err(|e| Error::io("mount overlay", mnt, e.into()))
}

/// Finds an executable on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// Whether `fuse-overlayfs` can run here: installed, and `/dev/fuse` opens.
pub fn fuse_available() -> Result<()> {
    if which("fuse-overlayfs").is_none() {
        return Err(Error::io(
            "find",
            "fuse-overlayfs",
            std::io::Error::new(std::io::ErrorKind::NotFound, "not installed (not on PATH)"),
        ));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map(drop)
        .map_err(|e| Error::io("open", "/dev/fuse", e))
}

/// Starts `fuse-overlayfs` on `via` (a path naming the mount point's descriptor `fd`) and
/// waits until the directory open as `fd` is mounted on, at `mnt` or wherever it was renamed
/// before (the caller then undoes that mount).
fn mount_fuse(
    layers: &Layers,
    via: &Path,
    fd: std::os::fd::RawFd,
    mnt: &Path,
    log: &Path,
) -> Result<Child> {
    // fuse-overlayfs splits its options on ',' and its lower layers on ':' without escapes.
    let all = layers.lower.iter().map(PathBuf::as_path).chain([
        layers.upper.as_path(),
        layers.work.as_path(),
        mnt,
    ]);
    for p in all {
        if p.as_os_str()
            .as_bytes()
            .iter()
            .any(|b| b",:\\\n".contains(b))
        {
            return Err(Error::io(
                "mount fuse-overlayfs",
                p,
                std::io::Error::other("fuse-overlayfs cannot take a path with ',', ':' or '\\'"),
            ));
        }
    }
    let opts = layers.options(false);
    let logf = std::fs::File::create(log).map_err(|e| Error::io("create", log, e))?;
    let mut child = Command::new("fuse-overlayfs")
        .arg("-f")
        .arg("-o")
        .arg(OsStr::from_bytes(&opts))
        .arg(via)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(logf)
        .spawn()
        .map_err(|e| Error::io("run fuse-overlayfs for", mnt, e))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let at = moved(fd, mnt).unwrap_or_else(|| mnt.to_path_buf());
        if is_mounted(&at)? {
            return Ok(child);
        }
        let exited = child
            .try_wait()
            .map_err(|e| Error::io("wait for fuse-overlayfs on", mnt, e))?;
        if exited.is_some() || Instant::now() > deadline {
            if exited.is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
            let mut msg = String::new();
            if let Ok(mut f) = std::fs::File::open(log) {
                let _ = f.read_to_string(&mut msg);
            }
            return Err(Error::io(
                "mount fuse-overlayfs",
                mnt,
                std::io::Error::other(format!(
                    "fuse-overlayfs did not mount ({}): {}",
                    exited.map_or("timed out".to_string(), |s| s.to_string()),
                    msg.trim()
                )),
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn wait_or_kill(child: &mut Child, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn umount2(mnt: &Path, flags: libc::c_int) -> std::io::Result<()> {
    let flags = rustix::mount::UnmountFlags::from_bits_retain(flags as u32);
    Ok(rustix::mount::unmount(mnt, flags)?)
}

/// `fusermount3 -u` (else `fusermount -u`), `-z` when `lazy`.
fn fusermount(mnt: &Path, lazy: bool) -> std::io::Result<()> {
    let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
    for bin in ["fusermount3", "fusermount"] {
        let mut c = Command::new(bin);
        c.arg("-u");
        if lazy {
            c.arg("-z");
        }
        match c
            .arg(mnt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => last = std::io::Error::other(format!("{bin} -u: {s}")),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_escapes() {
        assert_eq!(escape_opt(Path::new("/a,b:c\\d")), br"/a\,b\:c\\d".to_vec());
    }

    #[test]
    fn too_many_layers_do_not_fit() {
        let l = |n: usize| Layers {
            lower: (0..n)
                .map(|i| PathBuf::from(format!("/s/.layer-{i:040}")))
                .collect(),
            upper: "/s/u".into(),
            work: "/s/w".into(),
            rename_dirs: true,
        };
        assert!(l(3).fits());
        assert!(!l(200).fits());
    }
}
