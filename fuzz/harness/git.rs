//! `git apply`, the reference the fuzzer compares patchbox with, and the classes of its
//! refusals (git's error line with names and numbers taken out).

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use super::git_cmd;

pub(super) fn git_ok(dir: &Path, home: &Path, args: &[&str]) -> Vec<u8> {
    let out = git_cmd(dir, home, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `git apply --binary` of `patch` in `dir` (not in a repository): (applied, stderr).
pub fn git_apply(dir: &Path, home: &Path, patch: &[u8]) -> (bool, String) {
    git_apply_args(dir, home, patch, &[])
}

/// [`git_apply`] with more options.
pub fn git_apply_args(dir: &Path, home: &Path, patch: &[u8], extra: &[&str]) -> (bool, String) {
    let mut args = vec!["apply", "--binary"];
    args.extend_from_slice(extra);
    args.push("-");
    let mut child = git_cmd(dir, home, &args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn git apply");
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(patch);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first `error:`/`fatal:` line of git's stderr with names and numbers taken out.
pub fn git_error_class(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: ") || l.starts_with("fatal: "))
        .unwrap_or_else(|| stderr.lines().next().unwrap_or(""));
    let msg = line.split_once(": ").map_or(line, |x| x.1);
    let msg = if msg.starts_with("patch failed") {
        "patch failed".to_string()
    } else if let Some(i) = msg.find("corrupt binary patch") {
        msg[i..i + "corrupt binary patch".len()].to_string()
    } else if msg.starts_with("new mode (") && msg.contains("does not match old mode") {
        "new mode of P does not match old mode".to_string()
    } else if msg.starts_with("path ") && msg.contains(" has been ") {
        format!(
            "path P has been {}",
            msg.rsplit(" has been ").next().unwrap_or("")
        )
    } else if let Some(i) = msg.find("invalid path") {
        msg[i..i + "invalid path".len()].to_string()
    } else if let Some(i) = msg.rfind(": ") {
        // "<path>: <what>"
        msg[i + 2..].to_string()
    } else {
        msg.to_string()
    };
    let mut out = String::new();
    let mut quote = false;
    for ch in msg.chars() {
        match ch {
            '\'' => {
                quote = !quote;
                if quote {
                    out.push_str("'P'");
                }
            }
            _ if quote => {}
            '0'..='9' => {
                if !out.ends_with('N') {
                    out.push('N')
                }
            }
            _ => out.push(ch),
        }
    }
    // Drop parenthesized object ids and line numbers: "(NbNceN…)".
    let mut res = String::new();
    let mut rest = out.trim();
    while let Some(i) = rest.find(" (") {
        let close = rest[i..].find(')').map(|c| i + c);
        match close {
            Some(c) if rest[i + 2..c].chars().all(|ch| ch.is_ascii_alphanumeric()) => {
                res.push_str(&rest[..i]);
                rest = &rest[c + 1..];
            }
            _ => {
                res.push_str(&rest[..i + 2]);
                rest = &rest[i + 2..];
            }
        }
    }
    res.push_str(rest);
    res
}
