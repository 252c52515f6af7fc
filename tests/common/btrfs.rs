//! A small Btrfs filesystem for a test: an image in a temporary directory, loop-mounted,
//! unmounted when dropped. Needs root and `mkfs.btrfs` (btrfs-progs); `None` otherwise,
//! after saying why.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted Btrfs image.
pub struct Btrfs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl Btrfs {
    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.mnt
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

fn run(cmd: &mut Command) -> bool {
    cmd.output().is_ok_and(|o| o.status.success())
}

/// A fresh Btrfs of 512 MB, or `None` (with the reason on stderr) where none can be made.
pub fn mount() -> Option<Btrfs> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: mounting a Btrfs image needs root");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("fs.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let made = run(Command::new("truncate").arg("-s").arg("512M").arg(&img))
        && run(Command::new("mkfs.btrfs").arg("-q").arg(&img));
    if !made {
        eprintln!("skipped: mkfs.btrfs (btrfs-progs) is not available");
        return None;
    }
    if !run(Command::new("mount")
        .arg("-o")
        .arg("loop")
        .arg(&img)
        .arg(&mnt))
    {
        eprintln!("skipped: this kernel cannot loop-mount Btrfs");
        return None;
    }
    Some(Btrfs { _dir: dir, mnt })
}
