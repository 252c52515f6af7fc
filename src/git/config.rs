//! A reader for git's configuration files, limited to the keys selection needs
//! (`core.excludesFile`, `core.ignoreCase`, `core.attributesFile`, `core.autocrlf`,
//! `extensions.objectFormat`, `extensions.worktreeConfig`) but with git's full syntax: sections and subsections, quoting,
//! escapes, comments, continuation lines and `include.path`. `includeIf`, `~user/` and
//! `%(prefix)/` paths are not followed.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

#[derive(Default, Debug)]
pub(crate) struct ConfigVals {
    /// `Some(None)`: set, but to something unusable (no global excludes then).
    pub(crate) excludes_file: Option<Option<PathBuf>>,
    pub(crate) ignore_case: Option<bool>,
    /// `core.attributesFile`; `Some(None)`: set, but to something unusable.
    pub(crate) attributes_file: Option<Option<PathBuf>>,
    /// `core.autocrlf`: `Some(true)` for `true` and `input` (both convert on check-in).
    pub(crate) autocrlf: Option<bool>,
    pub(crate) object_format: Option<String>,
    pub(crate) worktree_config: Option<bool>,
    /// `extensions.partialClone` set, or some `remote.<name>.promisor` true.
    pub(crate) promisor: bool,
}

pub(crate) fn read_config_file(
    path: &Path,
    home: Option<&Path>,
    cfg: &mut ConfigVals,
    depth: u32,
) -> Result<()> {
    let data = match fs::read(path) {
        Ok(d) => d,
        // Missing or unreadable config: git skips a missing one; be lenient with the rest.
        Err(_) => return Ok(()),
    };
    parse_config(&data, path, home, cfg, depth)
}

pub(crate) fn parse_bool(v: Option<&[u8]>) -> Option<bool> {
    let Some(v) = v else { return Some(true) };
    let s = String::from_utf8_lossy(v).to_ascii_lowercase();
    match s.as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" | "" => Some(false),
        _ => s.parse::<i64>().ok().map(|n| n != 0),
    }
}

/// Git's `interpolate_path` for the cases that matter: `~/…` and absolute/relative paths.
fn expand_path(v: &[u8], home: Option<&Path>) -> Option<PathBuf> {
    if v == b"~" {
        return home.map(Path::to_path_buf);
    }
    if let Some(rest) = v.strip_prefix(b"~/") {
        return home.map(|h| h.join(OsStr::from_bytes(rest)));
    }
    if v.starts_with(b"~") || v.starts_with(b"%(prefix)/") {
        return None; // ~user and runtime-prefix paths are not supported.
    }
    Some(PathBuf::from(OsStr::from_bytes(v)))
}

struct CfgCursor<'a> {
    d: &'a [u8],
    p: usize,
}

impl CfgCursor<'_> {
    /// Next character with `\r\n` folded to `\n`; `None` at end of input.
    fn next(&mut self) -> Option<u8> {
        let c = *self.d.get(self.p)?;
        self.p += 1;
        if c == b'\r' && self.d.get(self.p) == Some(&b'\n') {
            self.p += 1;
            return Some(b'\n');
        }
        Some(c)
    }
    fn peek(&self) -> Option<u8> {
        self.d.get(self.p).copied()
    }
    fn line(&self) -> usize {
        1 + self.d[..self.p.min(self.d.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    }

    /// Git's `parse_value`: quotes, escapes, comments, continuation lines.
    fn value(&mut self) -> Option<Vec<u8>> {
        let (mut quote, mut comment, mut space) = (false, false, 0usize);
        let mut out = Vec::new();
        loop {
            let c = self.next().unwrap_or(b'\n');
            if c == b'\n' {
                return if quote { None } else { Some(out) };
            }
            if comment {
                continue;
            }
            if c.is_ascii_whitespace() && !quote {
                if !out.is_empty() {
                    space += 1;
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            out.extend(std::iter::repeat_n(b' ', space));
            space = 0;
            if c == b'\\' {
                let e = match self.next().unwrap_or(b'\n') {
                    b'\n' => continue,
                    b't' => b'\t',
                    b'b' => 8,
                    b'n' => b'\n',
                    b'\\' => b'\\',
                    b'"' => b'"',
                    _ => return None,
                };
                out.push(e);
                continue;
            }
            if c == b'"' {
                quote = !quote;
                continue;
            }
            out.push(c);
        }
    }
}

fn parse_config(
    data: &[u8],
    path: &Path,
    home: Option<&Path>,
    cfg: &mut ConfigVals,
    depth: u32,
) -> Result<()> {
    let mut cur = CfgCursor {
        d: data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data),
        p: 0,
    };
    let bad = |cur: &CfgCursor| Error::Git {
        path: path.to_path_buf(),
        reason: format!("bad config line {}", cur.line()),
    };
    let mut section: Vec<u8> = Vec::new();
    let mut subsection: Option<Vec<u8>> = None;
    loop {
        let Some(c) = cur.next() else { return Ok(()) };
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == b'#' || c == b';' {
            while let Some(c) = cur.next() {
                if c == b'\n' {
                    break;
                }
            }
            continue;
        }
        if c == b'[' {
            let start = cur.p;
            while cur
                .peek()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
            {
                cur.p += 1;
            }
            let name = data_lower(&cur.d[start..cur.p]);
            match cur.next() {
                Some(b']') => {
                    // Legacy `[section.sub]` form.
                    match name.iter().position(|&b| b == b'.') {
                        Some(dot) => {
                            section = name[..dot].to_vec();
                            subsection = Some(name[dot + 1..].to_vec());
                        }
                        None => {
                            section = name;
                            subsection = None;
                        }
                    }
                }
                Some(b' ') | Some(b'\t') => {
                    while matches!(cur.peek(), Some(b' ') | Some(b'\t')) {
                        cur.p += 1;
                    }
                    if cur.next() != Some(b'"') {
                        return Err(bad(&cur));
                    }
                    let mut sub = Vec::new();
                    loop {
                        match cur.next() {
                            None | Some(b'\n') => return Err(bad(&cur)),
                            Some(b'"') => break,
                            Some(b'\\') => match cur.next() {
                                None | Some(b'\n') => return Err(bad(&cur)),
                                Some(c) => sub.push(c),
                            },
                            Some(c) => sub.push(c),
                        }
                    }
                    if cur.next() != Some(b']') {
                        return Err(bad(&cur));
                    }
                    section = name;
                    subsection = Some(sub);
                }
                _ => return Err(bad(&cur)),
            }
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(bad(&cur));
        }
        let start = cur.p - 1;
        while cur
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-')
        {
            cur.p += 1;
        }
        let key = data_lower(&cur.d[start..cur.p]);
        while matches!(cur.peek(), Some(b' ') | Some(b'\t')) {
            cur.p += 1;
        }
        let value = match cur.next() {
            None | Some(b'\n') => None,
            Some(b'=') => Some(cur.value().ok_or_else(|| bad(&cur))?),
            Some(_) => return Err(bad(&cur)),
        };
        match (section.as_slice(), subsection.is_some(), key.as_slice()) {
            (b"core", false, b"excludesfile") => {
                if let Some(v) = value {
                    cfg.excludes_file = Some(expand_path(&v, home));
                }
            }
            (b"core", false, b"ignorecase") => {
                if let Some(b) = parse_bool(value.as_deref()) {
                    cfg.ignore_case = Some(b);
                }
            }
            (b"core", false, b"attributesfile") => {
                if let Some(v) = value {
                    cfg.attributes_file = Some(expand_path(&v, home));
                }
            }
            (b"core", false, b"autocrlf") => {
                let v = value.as_deref();
                let on = if v.is_some_and(|v| v.eq_ignore_ascii_case(b"input")) {
                    Some(true)
                } else {
                    parse_bool(v)
                };
                // An unparsable value is fatal in git; count it as "on" (the safe reading:
                // nothing is then trusted to equal its blob).
                cfg.autocrlf = Some(on.unwrap_or(true));
            }
            (b"extensions", false, b"objectformat") => {
                if let Some(v) = value {
                    cfg.object_format = Some(String::from_utf8_lossy(&v).into_owned());
                }
            }
            (b"extensions", false, b"worktreeconfig") => {
                if let Some(b) = parse_bool(value.as_deref()) {
                    cfg.worktree_config = Some(b);
                }
            }
            (b"extensions", false, b"partialclone") => cfg.promisor = true,
            (b"remote", true, b"promisor") => {
                cfg.promisor |= parse_bool(value.as_deref()).unwrap_or(true);
            }
            (b"include", false, b"path") if depth < 10 => {
                if let Some(p) = value.and_then(|v| expand_path(&v, home)) {
                    let p = if p.is_absolute() {
                        p
                    } else {
                        path.parent().unwrap_or(Path::new("/")).join(p)
                    };
                    read_config_file(&p, home, cfg, depth + 1)?;
                }
            }
            _ => {}
        }
    }
}

fn data_lower(b: &[u8]) -> Vec<u8> {
    b.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_clone_is_recognised() {
        for (text, want) in [
            (&b"[extensions]\npartialClone = origin\n"[..], true),
            (b"[remote \"origin\"]\n\tpromisor = true\n", true),
            (b"[remote \"origin\"]\n\tpromisor = false\n", false),
            (
                b"[remote \"origin\"]\n\turl = /x\n[core]\npromisor = true\n",
                false,
            ),
        ] {
            let mut cfg = ConfigVals::default();
            parse_config(text, Path::new("/c"), None, &mut cfg, 0).unwrap();
            assert_eq!(cfg.promisor, want, "{}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn config_values() {
        let text = b"[core]\n\texcludesFile = \"~/my ignore\" ; comment\n\tignorecase\n[Extensions]\nobjectFormat=sha1\n[remote \"o\\\"x\"]\nurl = a\n";
        let mut cfg = ConfigVals::default();
        parse_config(text, Path::new("/c"), Some(Path::new("/h")), &mut cfg, 0).unwrap();
        assert_eq!(cfg.excludes_file, Some(Some(PathBuf::from("/h/my ignore"))));
        assert_eq!(cfg.ignore_case, Some(true));
        assert_eq!(cfg.object_format.as_deref(), Some("sha1"));
        let mut cfg = ConfigVals::default();
        assert!(parse_config(b"[core\n", Path::new("/c"), None, &mut cfg, 0).is_err());
        assert!(parse_config(b"x = \"open\n", Path::new("/c"), None, &mut cfg, 0).is_err());
        parse_config(
            b"[core]\nexcludesfile = a\\\n b\n",
            Path::new("/c"),
            None,
            &mut cfg,
            0,
        )
        .unwrap();
        assert_eq!(cfg.excludes_file, Some(Some(PathBuf::from("a b"))));

        for (text, want) in [
            (&b"[core]\nautocrlf = input\n"[..], Some(true)),
            (b"[core]\nautocrlf\n", Some(true)),
            (b"[core]\nautoCRLF = false\n", Some(false)),
            (
                b"[core]\nautocrlf = true\n[core]\nautocrlf = 0\n",
                Some(false),
            ),
            (b"[core]\nautocrlf = weird\n", Some(true)),
            (b"[core \"x\"]\nautocrlf = true\n", None),
        ] {
            let mut cfg = ConfigVals::default();
            parse_config(text, Path::new("/c"), None, &mut cfg, 0).unwrap();
            assert_eq!(cfg.autocrlf, want, "{}", String::from_utf8_lossy(text));
        }
        let mut cfg = ConfigVals::default();
        parse_config(
            b"[core]\n\tattributesFile = ~/attrs\n",
            Path::new("/c"),
            Some(Path::new("/h")),
            &mut cfg,
            0,
        )
        .unwrap();
        assert_eq!(cfg.attributes_file, Some(Some(PathBuf::from("/h/attrs"))));
    }
}
