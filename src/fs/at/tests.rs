//! The layer's own guarantees, on a scratch directory: nothing follows a symlink at a
//! parent or at the last name, and nothing replaces an existing name unless asked to.

use std::os::fd::AsFd;
use std::path::Path;

use super::*;

fn scratch() -> (tempfile::TempDir, std::os::fd::OwnedFd) {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("a/b")).unwrap();
    std::os::unix::fs::symlink(t.path().join("a"), t.path().join("link")).unwrap();
    let fd = open_path_dir(t.path()).unwrap();
    (t, fd)
}

#[test]
fn opening_beneath_refuses_symlinks_and_escapes() {
    let (_t, root) = scratch();
    let base = root.as_fd();
    assert!(open_beneath(base, Path::new("a/b")).is_ok());
    assert!(walk_beneath(base, Path::new("a/b")).is_ok());
    assert_eq!(
        open_beneath(base, Path::new("link/b")).err(),
        Some(Errno::LOOP)
    );
    assert_eq!(
        walk_beneath(base, Path::new("link/b")).err(),
        Some(Errno::LOOP)
    );
    assert_eq!(
        walk_beneath(base, Path::new("../x")).err(),
        Some(Errno::XDEV)
    );
    let e = open_dir(base, c"link").unwrap_err();
    assert!(is_symlink_error(e, base, c"link"));
    assert!(is_symlink(base, c"link") && !is_dir(base, c"link") && is_dir(base, c"a"));
}

#[test]
fn names_are_never_replaced_unless_asked() {
    let (t, root) = scratch();
    let base = root.as_fd();
    let f = create_new(base, c"f", 0o644).unwrap();
    assert_eq!(create_new(base, c"f", 0o644).err(), Some(Errno::EXIST));
    assert_eq!(create_new(base, c"link", 0o644).err(), Some(Errno::EXIST));
    chmod(f.as_fd(), 0o600).unwrap();
    set_fd_mtime(f.as_fd(), crate::fs::Timestamp::new(1_000, 7)).unwrap();
    let st = lstat(base, c"f").unwrap();
    assert_eq!(
        (st.st_mode & 0o7777, st.st_mtime, st.st_mtime_nsec as i64),
        (0o600, 1_000, 7)
    );
    assert_eq!(
        rename2(base, c"f", base, c"a", RenameFlags::NOREPLACE).err(),
        Some(Errno::EXIST)
    );
    rename2(base, c"f", base, c"link", RenameFlags::EXCHANGE).unwrap();
    assert_eq!(
        readlink(base, c"f").unwrap(),
        t.path().join("a").as_os_str().as_encoded_bytes()
    );
    // A nameless file, named once, never over an existing name.
    let tmp = tmpfile(base).unwrap();
    assert_eq!(
        link_tmpfile(tmp.as_fd(), base, c"a").err(),
        Some(Errno::EXIST)
    );
    link_tmpfile(tmp.as_fd(), base, c"new").unwrap();
    let mut got = names(open_dir(base, c".").unwrap()).unwrap();
    got.sort();
    assert_eq!(got, [c"a", c"f", c"link", c"new"].map(|c| c.to_owned()));
}
