//! AFL++ target: the patch parser, then the apply planner in check mode on a fixed small
//! project (text, binary, executable, symlink, nested dirs). Invariants: no panic (AFL
//! records it as a crash), and check mode leaves the project untouched (aborts otherwise).
//! See fuzz/README.md.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use patchbox::apply::{apply_parsed, ApplyOptions};
use patchbox::patch::parse::parse_patch;

fn snapshot(root: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            let m = fs::symlink_metadata(&p).unwrap();
            let content = if m.file_type().is_symlink() {
                fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes()
            } else if m.is_file() {
                fs::read(&p).unwrap()
            } else {
                stack.push(p.clone());
                Vec::new()
            };
            out.push((p.display().to_string(), m.permissions().mode(), content));
        }
    }
    out
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    fs::create_dir_all(root.join("d/e")).unwrap();
    fs::write(root.join("a.txt"), "a\nb\nc\nsame\nsame\nx\n").unwrap();
    fs::write(root.join("d/b.txt"), "{\n}\nline 1\n").unwrap();
    fs::write(root.join("d/e/c"), "x\r\ny\r\n").unwrap();
    fs::write(root.join("bin.dat"), b"\0\x01\x02\x03binary\n").unwrap();
    fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    symlink("a.txt", root.join("l")).unwrap();
    symlink("../outside", root.join("esc")).unwrap();
    let before = snapshot(&root);
    let opts = ApplyOptions {
        check: true,
        ..ApplyOptions::default()
    };
    afl::fuzz!(|data: &[u8]| {
        if let Ok(patch) = parse_patch(data) {
            let _ = patch.paths();
            let _ = apply_parsed(&root, &patch, &opts);
            if snapshot(&root) != before {
                std::process::abort();
            }
        }
    });
}
