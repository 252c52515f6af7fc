//! Reading git's machine output: NUL-separated name lists, `git diff --raw -z --no-abbrev`
//! entries ([`RawEntry`]), and blob contents by `git cat-file --batch`.
//!
//! Pure parsing, apart from [`read_blobs`] which runs one git call.

use std::collections::HashMap;
use std::path::Path;

use super::git::Git;

/// The mode of a gitlink (a submodule pointer) in raw diff output.
pub(super) const GITLINK: &str = "160000";

/// Splits NUL-separated git output into strings.
pub(super) fn nul_fields(out: &[u8]) -> Vec<String> {
    out.split(|&b| b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// Whether `oid` is git's all-zero id (no object: the side of an addition or deletion).
pub(super) fn is_zero_oid(oid: &str) -> bool {
    oid.bytes().all(|b| b == b'0')
}

/// One entry of `git diff --raw -z --no-abbrev`.
pub(super) struct RawEntry {
    pub(super) old_mode: String,
    pub(super) new_mode: String,
    pub(super) old_oid: String,
    pub(super) new_oid: String,
    pub(super) status: char,
    pub(super) path: String,
    /// The path exactly as git wrote it (not necessarily UTF-8).
    pub(super) path_bytes: Vec<u8>,
}

impl RawEntry {
    /// Whether either side is a submodule pointer.
    pub(super) fn is_gitlink(&self) -> bool {
        self.old_mode == GITLINK || self.new_mode == GITLINK
    }
}

/// The entries of `git diff --raw -z --no-abbrev` output (renames off: one path each).
pub(super) fn parse_raw(out: &[u8]) -> Vec<RawEntry> {
    let fields: Vec<&[u8]> = out.split(|&b| b == 0).collect();
    let mut v = Vec::new();
    let mut i = 0;
    while i + 1 < fields.len() {
        let head = String::from_utf8_lossy(fields[i]);
        let Some(head) = head.strip_prefix(':') else {
            i += 1;
            continue;
        };
        let parts: Vec<&str> = head.split(' ').collect();
        if parts.len() >= 5 {
            v.push(RawEntry {
                old_mode: parts[0].to_string(),
                new_mode: parts[1].to_string(),
                old_oid: parts[2].to_string(),
                new_oid: parts[3].to_string(),
                status: parts[4].chars().next().unwrap_or('M'),
                path: String::from_utf8_lossy(fields[i + 1]).into_owned(),
                path_bytes: fields[i + 1].to_vec(),
            });
        }
        i += 2;
    }
    v
}

/// The contents of blobs, by `git cat-file --batch`.
pub(super) fn read_blobs(dir: &Path, oids: &[String]) -> Result<HashMap<String, Vec<u8>>, String> {
    let mut out = HashMap::new();
    if oids.is_empty() {
        return Ok(out);
    }
    let input: String = oids.iter().map(|o| format!("{o}\n")).collect();
    let data = Git::at(dir)
        .input(input.as_bytes())
        .ok(&["cat-file", "--batch"])?;
    let mut rest = &data[..];
    for oid in oids {
        let nl = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("truncated cat-file output")?;
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        rest = &rest[nl + 1..];
        let size: usize = header
            .split(' ')
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("object {oid}: {header}"))?;
        if rest.len() < size + 1 {
            return Err(format!("object {oid}: truncated"));
        }
        out.insert(oid.clone(), rest[..size].to_vec());
        rest = &rest[size + 1..];
    }
    Ok(out)
}
