//! Running git as the tests' oracle, isolated from the user's configuration.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A `git` command in `dir` with `home` as its HOME: no user or system configuration, no
/// repository above `dir`, fixed identity and settings.
pub fn git_cmd(dir: &Path, home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap_or(dir))
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .args([
            "-c",
            "user.name=Patchbox Test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "core.autocrlf=false",
            "-c",
            "core.symlinks=true",
            "-c",
            "gc.auto=0",
        ])
        .args(args);
    c
}

pub fn git(dir: &Path, home: &Path, args: &[&str]) -> Output {
    let out = git_cmd(dir, home, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `git apply` of `patch` in `dir` (not a repository): the oracle.
pub fn git_apply(dir: &Path, home: &Path, patch: &[u8]) -> Output {
    use std::io::Write;
    let mut child = git_cmd(dir, home, &["apply", "--binary", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn git apply");
    child.stdin.take().unwrap().write_all(patch).unwrap();
    child.wait_with_output().unwrap()
}
