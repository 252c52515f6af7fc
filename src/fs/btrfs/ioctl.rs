//! The Btrfs ioctls the change record needs, as small safe calls: a subvolume's creation,
//! the tree search (`TREE_SEARCH_V2`) and the inode-to-directory lookup (`INO_LOOKUP`).
//!
//! The kernel's structures are laid out here by hand (they are stable ABI, `linux/btrfs.h`);
//! no crate offers the search and the lookup without linking `libbtrfsutil`, which does not
//! have the tree search at all.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

const MAGIC: u64 = 0x94;

/// `_IOC(dir, 0x94, nr, size)` as the kernel encodes it.
const fn ioc(dir: u64, nr: u64, size: u64) -> u64 {
    (dir << 30) | (size << 16) | (MAGIC << 8) | nr
}
const WRITE: u64 = 1;
const READ_WRITE: u64 = 3;
const SUBVOL_CREATE: u64 = ioc(WRITE, 14, 4096);
const SNAP_CREATE_V2: u64 = ioc(WRITE, 23, 4096);
const TREE_SEARCH_V2: u64 = ioc(READ_WRITE, 17, 112);
const INO_LOOKUP: u64 = ioc(READ_WRITE, 18, 4096);

/// The search's output buffer: room for many leaves' worth of items per call.
const SEARCH_BUF: usize = 64 * 1024;

/// `struct btrfs_ioctl_search_key`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SearchKey {
    tree_id: u64,
    min_objectid: u64,
    max_objectid: u64,
    min_offset: u64,
    max_offset: u64,
    min_transid: u64,
    max_transid: u64,
    min_type: u32,
    max_type: u32,
    nr_items: u32,
    unused: u32,
    unused1: [u64; 4],
}

/// `struct btrfs_ioctl_search_args_v2` with its buffer.
#[repr(C)]
struct SearchArgs {
    key: SearchKey,
    buf_size: u64,
    buf: [u8; SEARCH_BUF],
}

/// A key of the Btrfs b-trees: (object id, item type, offset), ordered in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// The object (an inode number in a subvolume's tree).
    pub objectid: u64,
    /// The item type (`INODE_ITEM`, `INODE_REF`, …).
    pub kind: u8,
    /// Type-specific (a parent directory's inode for an `INODE_REF`, a file offset …).
    pub offset: u64,
}

impl Key {
    /// The key right after this one, `None` past the last.
    fn next(self) -> Option<Key> {
        if self.offset < u64::MAX {
            return Some(Key {
                offset: self.offset + 1,
                ..self
            });
        }
        if self.kind < u8::MAX {
            return Some(Key {
                kind: self.kind + 1,
                offset: 0,
                ..self
            });
        }
        self.objectid.checked_add(1).map(|objectid| Key {
            objectid,
            kind: 0,
            offset: 0,
        })
    }
}

/// Calls `each(key, item)` for every item of tree `tree_id` (0: the subvolume `fd` is in)
/// whose key is in `from..=to`, skipping the leaves no transaction from `min_transid` on
/// wrote (the kernel does not descend into older subtrees). Needs `CAP_SYS_ADMIN`.
pub fn search(
    fd: BorrowedFd<'_>,
    tree_id: u64,
    from: Key,
    to: Key,
    min_transid: u64,
    mut each: impl FnMut(Key, &[u8]),
) -> io::Result<()> {
    let mut args = Box::new(SearchArgs {
        key: SearchKey::default(),
        buf_size: SEARCH_BUF as u64,
        buf: [0; SEARCH_BUF],
    });
    let mut at = from;
    loop {
        args.key = SearchKey {
            tree_id,
            min_objectid: at.objectid,
            max_objectid: to.objectid,
            min_offset: at.offset,
            max_offset: to.offset,
            min_transid,
            max_transid: u64::MAX,
            min_type: u32::from(at.kind),
            max_type: u32::from(to.kind),
            nr_items: 4096,
            ..SearchKey::default()
        };
        args.buf_size = SEARCH_BUF as u64;
        // SAFETY: `args` is a live `btrfs_ioctl_search_args_v2` whose `buf_size` is the
        // length of its buffer; the kernel writes no further.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), TREE_SEARCH_V2 as _, &mut *args) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let found = args.key.nr_items as usize;
        if found == 0 {
            return Ok(());
        }
        let mut pos = 0usize;
        let mut last = at;
        for _ in 0..found {
            let head = args
                .buf
                .get(pos..pos + 32)
                .ok_or_else(|| io::Error::other("tree search: truncated item header"))?;
            let objectid = le64(head, 8);
            let offset = le64(head, 16);
            let kind = le32(head, 24);
            let len = le32(head, 28) as usize;
            let data = args
                .buf
                .get(pos + 32..pos + 32 + len)
                .ok_or_else(|| io::Error::other("tree search: truncated item"))?;
            last = Key {
                objectid,
                kind: kind as u8,
                offset,
            };
            each(last, data);
            pos += 32 + len;
        }
        match last.next() {
            Some(n) if n <= to => at = n,
            _ => return Ok(()),
        }
    }
}

/// `struct btrfs_ioctl_ino_lookup_args`.
#[repr(C)]
struct InoLookup {
    treeid: u64,
    objectid: u64,
    name: [u8; 4080],
}

/// The path of directory `dir_ino` from the root of the subvolume `fd` is in, with a
/// trailing `/` (empty for the subvolume's root); and that subvolume's tree id.
pub fn dir_path(fd: BorrowedFd<'_>, dir_ino: u64) -> io::Result<(u64, Vec<u8>)> {
    let mut args = Box::new(InoLookup {
        treeid: 0,
        objectid: dir_ino,
        name: [0; 4080],
    });
    // SAFETY: `args` is a live `btrfs_ioctl_ino_lookup_args` of the size the number names.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), INO_LOOKUP as _, &mut *args) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = args.name.iter().position(|&b| b == 0).unwrap_or(0);
    Ok((args.treeid, args.name[..len].to_vec()))
}

/// `struct btrfs_ioctl_vol_args`.
#[repr(C)]
struct VolArgs {
    fd: i64,
    name: [u8; 4088],
}

/// Creates the subvolume `name` in directory `dir`.
pub fn create_subvolume(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let mut args = Box::new(VolArgs {
        fd: 0,
        name: [0; 4088],
    });
    put_name(&mut args.name, name)?;
    // SAFETY: `args` is a live `btrfs_ioctl_vol_args` with a NUL-terminated name.
    let r = unsafe { libc::ioctl(dir.as_raw_fd(), SUBVOL_CREATE as _, &mut *args) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct btrfs_ioctl_vol_args_v2`.
#[repr(C)]
struct VolArgsV2 {
    fd: i64,
    transid: u64,
    flags: u64,
    unused: [u64; 4],
    name: [u8; 4040],
}

/// Makes `name` in directory `dir` a writable snapshot of the subvolume whose root is
/// `source`: every file shared with it until one side writes.
pub fn snapshot(source: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let mut args = Box::new(VolArgsV2 {
        fd: i64::from(source.as_raw_fd()),
        transid: 0,
        flags: 0,
        unused: [0; 4],
        name: [0; 4040],
    });
    put_name(&mut args.name, name)?;
    // SAFETY: `args` is a live `btrfs_ioctl_vol_args_v2` with a NUL-terminated name.
    let r = unsafe { libc::ioctl(dir.as_raw_fd(), SNAP_CREATE_V2 as _, &mut *args) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes `name`, NUL-terminated, into a volume ioctl's name field; refuses what is no single
/// path component or does not fit.
fn put_name(field: &mut [u8], name: &OsStr) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= field.len() || bytes.contains(&b'/') || bytes.contains(&0)
    {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    field[..bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// The little-endian `u64` at `at` of `b` (0 past its end: callers check lengths first).
pub fn le64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// The little-endian `u32` at `at` of `b` (0 past its end).
pub fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0)
}

/// The little-endian `u16` at `at` of `b` (0 past its end).
pub fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // The values `linux/btrfs.h` produces on x86-64 and aarch64.
        assert_eq!(SUBVOL_CREATE, 0x5000_940e);
        assert_eq!(SNAP_CREATE_V2, 0x5000_9417);
        assert_eq!(std::mem::size_of::<VolArgsV2>(), 4096);
        assert_eq!(TREE_SEARCH_V2, 0xc070_9411);
        assert_eq!(INO_LOOKUP, 0xd000_9412);
        assert_eq!(std::mem::size_of::<SearchKey>(), 104);
        assert_eq!(std::mem::size_of::<InoLookup>(), 4096);
        assert_eq!(std::mem::size_of::<VolArgs>(), 4096);
    }

    #[test]
    fn names_are_single_components_that_fit() {
        let mut f = [0u8; 8];
        assert!(put_name(&mut f, OsStr::new("tree")).is_ok());
        assert_eq!(&f[..5], b"tree\0");
        for bad in ["", "a/b", "toolongname"] {
            assert!(put_name(&mut [0u8; 8], OsStr::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_advance_in_tree_order() {
        let k = Key {
            objectid: 5,
            kind: 1,
            offset: u64::MAX,
        };
        assert_eq!(
            k.next(),
            Some(Key {
                objectid: 5,
                kind: 2,
                offset: 0
            })
        );
        let last = Key {
            objectid: u64::MAX,
            kind: u8::MAX,
            offset: u64::MAX,
        };
        assert_eq!(last.next(), None);
    }
}
