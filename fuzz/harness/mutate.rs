//! Structure-aware mutations of patch text: mangled and quoted headers, odd modes, spliced
//! lines, hunks cut, counts off, lines dropped or duplicated.

use super::tree::{random_path, LINES};
use super::Rng;

const MANGLED: &[&str] = &[
    "../outside/secret.txt",
    "d/../../outside/secret.txt",
    "d//b.txt",
    "./a.txt",
    "d/./b.txt",
    ".git/config",
    ".git/hooks/pre-commit",
    ".GIT/config",
    ".Git/HEAD",
    ".git./config",
    ".git /config",
    "git~1/config",
    "GIT~1/config",
    "d/.git/x",
    ".gitmodules",
    "@OUTSIDE@/secret.txt",
    "@OUTSIDE@/new.txt",
    "l/x",
    "l/secret.txt",
    "a.txt/x",
    "",
    "/",
    ".",
    "..",
];
/// Whole tokens (prefix included), quoted the way git quotes.
const QUOTED: &[&str] = &[
    "\"a/q\\tx\"",
    "\"a/\\303\\274.txt\"",
    "\"a/..\\057outside\\057secret.txt\"",
    "\"a/.\\147it/config\"",
    "\"a/x\\000y\"",
    "\"a/bad\\qescape\"",
    "\"a/unterminated",
    "\"a/quo\\\"te\"",
    "\"a/back\\\\slash\"",
    "\"a/nl\\nname\"",
    "\"/abs\"",
    "\"\"",
];
const MODES: &[&str] = &[
    "100644", "100755", "120000", "160000", "040000", "100600", "644", "0", "777777", "abc",
    "100644 ", "1006440",
];
const SPLICE: &[&str] = &[
    "GIT binary patch\n",
    "Binary files a/a.txt and b/a.txt differ\n",
    "index 0000000..1111111 100644\n",
    "index e69de29..e69de29\n",
    "new file mode 100644\n",
    "deleted file mode 100644\n",
    "--- /dev/null\n",
    "+++ /dev/null\n",
    "@@ -0,0 +1 @@\n",
    "@@ -1 +0,0 @@\n",
    "-- \n",
    "2.39.5\n",
    "dissimilarity index 100%\n",
    "similarity index 100%\n",
    "\\ No newline at end of file\n",
    "literal 0\n",
    "delta 0\n",
    "\n",
    "diff --git a/a.txt b/a.txt\n",
    "diff --git a/c b/c\n",
];

fn split_lines(p: &[u8]) -> Vec<Vec<u8>> {
    p.split_inclusive(|&b| b == b'\n')
        .map(|l| l.to_vec())
        .collect()
}

fn is_hunk_line(l: &[u8]) -> bool {
    matches!(l.first(), Some(b' ' | b'-' | b'+'))
        && !l.starts_with(b"---")
        && !l.starts_with(b"+++")
}

fn random_name(rng: &mut Rng) -> String {
    if rng.chance(1, 3) {
        random_path(rng)
    } else {
        rng.pick(MANGLED).to_string()
    }
}

/// A header line naming a path, with the path replaced.
fn mangle_header(rng: &mut Rng, line: &[u8], name: &str, quoted: Option<&str>) -> Option<Vec<u8>> {
    let s = String::from_utf8_lossy(line);
    let nl = if s.ends_with("\r\n") { "\r\n" } else { "\n" };
    let ab = |pre: &str| {
        quoted
            .map(|q| q.replacen("a/", pre, 1))
            .unwrap_or_else(|| format!("{pre}{name}"))
    };
    let out = if s.starts_with("diff --git ") {
        if rng.chance(1, 3) {
            format!("diff --git {} {}{nl}", ab("a/"), ab("b/"))
        } else {
            let other = random_name(rng);
            format!("diff --git a/{other} {}{nl}", ab("b/"))
        }
    } else if s.starts_with("--- ") && !s.starts_with("--- /dev/null") {
        format!("--- {}{nl}", ab("a/"))
    } else if s.starts_with("+++ ") && !s.starts_with("+++ /dev/null") {
        format!("+++ {}{nl}", ab("b/"))
    } else {
        let kw = ["rename from ", "rename to ", "copy from ", "copy to "]
            .into_iter()
            .find(|k| s.starts_with(k))?;
        let tok = quoted
            .map(|q| q.replacen("a/", "", 1))
            .unwrap_or_else(|| name.to_string());
        format!("{kw}{tok}{nl}")
    };
    Some(out.into_bytes())
}

/// Applies one random structure-aware mutation to `lines`; returns its name.
pub fn mutate_once(rng: &mut Rng, lines: &mut Vec<Vec<u8>>) -> &'static str {
    let n = lines.len();
    let idx =
        |rng: &mut Rng, pred: &dyn Fn(&[u8]) -> bool, lines: &Vec<Vec<u8>>| -> Option<usize> {
            let c: Vec<usize> = (0..lines.len()).filter(|&i| pred(&lines[i])).collect();
            if c.is_empty() {
                None
            } else {
                Some(*rng.pick(&c))
            }
        };
    match rng.below(20) {
        0 if n > 0 => {
            lines.remove(rng.below(n));
            "delete line"
        }
        1 if n > 0 => {
            let i = rng.below(n);
            let l = lines[i].clone();
            lines.insert(i, l);
            "duplicate line"
        }
        2 if n > 1 => {
            let i = rng.below(n - 1);
            lines.swap(i, i + 1);
            "swap lines"
        }
        3 => match idx(rng, &is_hunk_line, lines) {
            Some(i) => {
                lines[i][0] = *rng.pick(b" -+");
                "flip hunk line kind"
            }
            None => "none",
        },
        4 => match idx(rng, &is_hunk_line, lines) {
            Some(i) => {
                let keep = lines[i][0];
                let nl: &[u8] = if lines[i].ends_with(b"\r\n") {
                    b"\r\n"
                } else {
                    b"\n"
                };
                let mut l = vec![keep];
                l.extend_from_slice(rng.pick(LINES).as_bytes());
                l.extend_from_slice(nl);
                lines[i] = l;
                "change hunk line text"
            }
            None => "none",
        },
        5 | 6 => match idx(rng, &|l| l.starts_with(b"@@ "), lines) {
            Some(i) => {
                let s = String::from_utf8_lossy(&lines[i]).into_owned();
                let mut nums: Vec<(usize, usize)> = Vec::new();
                let b = s.as_bytes();
                let mut j = 0;
                while j < b.len() {
                    if b[j].is_ascii_digit() {
                        let st = j;
                        while j < b.len() && b[j].is_ascii_digit() {
                            j += 1;
                        }
                        nums.push((st, j));
                    } else {
                        j += 1;
                    }
                }
                if nums.is_empty() {
                    return "none";
                }
                let (st, en) = *rng.pick(&nums);
                let v: u64 = s[st..en].parse().unwrap_or(0);
                let nv = match rng.below(7) {
                    0 => v.saturating_add(1).to_string(),
                    1 => v.saturating_sub(1).to_string(),
                    2 => "0".into(),
                    3 => "99999".into(),
                    4 => "18446744073709551615".into(),
                    5 => "18446744073709551616".into(),
                    _ => (v + 2 + rng.below(5) as u64).to_string(),
                };
                let mut out = format!("{}{}{}", &s[..st], nv, &s[en..]);
                if rng.chance(1, 5) {
                    out = out.replacen(",", "", 1);
                }
                lines[i] = out.into_bytes();
                "hunk header number"
            }
            None => "none",
        },
        7 | 8 => {
            let header = |l: &[u8]| {
                l.starts_with(b"diff --git ")
                    || l.starts_with(b"--- ")
                    || l.starts_with(b"+++ ")
                    || l.starts_with(b"rename ")
                    || l.starts_with(b"copy ")
            };
            let name = random_name(rng);
            let quoted = if rng.chance(1, 4) {
                Some(*rng.pick(QUOTED))
            } else {
                None
            };
            if rng.chance(1, 2) {
                // every header of one file section
                let Some(start) = idx(
                    rng,
                    &|l| l.starts_with(b"diff --git ") || l.starts_with(b"--- "),
                    lines,
                ) else {
                    return "none";
                };
                let mut i = start;
                while i < lines.len()
                    && !is_hunk_line(&lines[i])
                    && !lines[i].starts_with(b"@@")
                    && (i == start || !lines[i].starts_with(b"diff --git "))
                {
                    if header(&lines[i]) {
                        if let Some(l) = mangle_header(rng, &lines[i], &name, quoted) {
                            lines[i] = l;
                        }
                    }
                    i += 1;
                }
                "mangle section paths"
            } else {
                match idx(rng, &header, lines) {
                    Some(i) => {
                        if let Some(l) = mangle_header(rng, &lines[i], &name, quoted) {
                            lines[i] = l;
                        }
                        "mangle one path"
                    }
                    None => "none",
                }
            }
        }
        9 => {
            let m = rng.pick(MODES);
            match idx(
                rng,
                &|l| {
                    l.ends_with(b"mode 100644\n")
                        || l.ends_with(b"mode 100755\n")
                        || l.ends_with(b"mode 120000\n")
                        || l.starts_with(b"index ")
                },
                lines,
            ) {
                Some(i) if rng.chance(2, 3) => {
                    let s = String::from_utf8_lossy(&lines[i]).into_owned();
                    let cut = s.trim_end().rfind(' ').unwrap_or(0);
                    lines[i] = format!("{} {m}\n", &s[..cut]).into_bytes();
                    "change mode"
                }
                _ => match idx(rng, &|l| l.starts_with(b"diff --git "), lines) {
                    Some(i) => {
                        let m2 = rng.pick(MODES);
                        let ins = match rng.below(3) {
                            0 => format!("old mode {m}\nnew mode {m2}\n"),
                            1 => format!("new file mode {m}\n"),
                            _ => format!("deleted file mode {m}\n"),
                        };
                        lines.insert(i + 1, ins.into_bytes());
                        "insert mode lines"
                    }
                    None => "none",
                },
            }
        }
        10 => match idx(rng, &|l| l.starts_with(b"diff --git "), lines) {
            Some(i) => {
                let kind = if rng.chance(1, 2) { "rename" } else { "copy" };
                let (x, y) = (random_name(rng), random_name(rng));
                let sim = rng.below(102);
                lines.insert(
                    i + 1,
                    format!("similarity index {sim}%\n{kind} from {x}\n{kind} to {y}\n")
                        .into_bytes(),
                );
                "insert rename/copy"
            }
            None => "none",
        },
        11 => {
            let mut all = lines.concat();
            all.truncate(rng.below(all.len() + 1));
            *lines = split_lines(&all);
            "truncate"
        }
        12 => {
            if let Some(i) = idx(rng, &|l| l.starts_with(b"\\ "), lines) {
                if rng.chance(1, 2) {
                    lines.remove(i);
                    return "remove no-newline marker";
                }
            }
            match idx(rng, &is_hunk_line, lines) {
                Some(i) => {
                    lines.insert(i + 1, b"\\ No newline at end of file\n".to_vec());
                    "insert no-newline marker"
                }
                None => "none",
            }
        }
        13 | 14 => {
            let is_bin_hdr = |l: &[u8]| l.starts_with(b"literal ") || l.starts_with(b"delta ");
            match idx(rng, &is_bin_hdr, lines) {
                Some(i) => {
                    match rng.below(5) {
                        0 => {
                            let s = String::from_utf8_lossy(&lines[i]).into_owned();
                            let (kw, num) =
                                s.trim_end().split_once(' ').unwrap_or(("literal", "0"));
                            let v: u64 = num.parse().unwrap_or(0);
                            let nv = *rng.pick(&[v + 1, v.saturating_sub(1), 0, 1 << 40, u64::MAX]);
                            lines[i] = format!("{kw} {nv}\n").into_bytes();
                        }
                        1 => {
                            let s = String::from_utf8_lossy(&lines[i]).into_owned();
                            let swapped = if s.starts_with("literal") {
                                s.replacen("literal", "delta", 1)
                            } else {
                                s.replacen("delta", "literal", 1)
                            };
                            lines[i] = swapped.into_bytes();
                        }
                        2 if i + 1 < lines.len() => {
                            let l = &mut lines[i + 1];
                            if l.len() > 2 {
                                let j = 1 + rng.below(l.len() - 2);
                                l[j] = *rng.pick(b"0Az~{!|#aZ_");
                            }
                        }
                        3 if i + 1 < lines.len() => {
                            let l = &mut lines[i + 1];
                            if !l.is_empty() {
                                l[0] = *rng.pick(b"AaZzB0~");
                            }
                        }
                        _ if i + 1 < lines.len() => {
                            lines.remove(i + 1);
                        }
                        _ => {}
                    }
                    "binary corruption"
                }
                None => "none",
            }
        }
        15 => {
            let starts: Vec<usize> = (0..n)
                .filter(|&i| lines[i].starts_with(b"diff --git "))
                .collect();
            if starts.is_empty() {
                return "none";
            }
            let k = rng.below(starts.len());
            let (s, e) = (starts[k], starts.get(k + 1).copied().unwrap_or(n));
            let sec: Vec<Vec<u8>> = lines[s..e].to_vec();
            let at = if rng.chance(1, 2) { e } else { n };
            for (j, l) in sec.into_iter().enumerate() {
                lines.insert(at + j, l);
            }
            "duplicate section"
        }
        16 => {
            if rng.chance(1, 2) {
                for l in lines.iter_mut() {
                    if l.ends_with(b"\n") && !l.ends_with(b"\r\n") {
                        l.pop();
                        l.extend_from_slice(b"\r\n");
                    }
                }
                "CRLF everywhere"
            } else if n > 0 {
                let l = &mut lines[rng.below(n)];
                if l.ends_with(b"\n") && !l.ends_with(b"\r\n") {
                    l.pop();
                    l.extend_from_slice(b"\r\n");
                }
                "CRLF one line"
            } else {
                "none"
            }
        }
        17 if n > 0 => {
            let i = rng.below(n);
            if !lines[i].is_empty() {
                let j = rng.below(lines[i].len());
                lines[i][j] = *rng.pick(b"\0\n \t+-@\"\\/\xff~1");
            }
            "byte flip"
        }
        18 => {
            let i = rng.below(n + 1);
            lines.insert(i, rng.pick(SPLICE).as_bytes().to_vec());
            "splice line"
        }
        _ => match idx(rng, &|l| l.starts_with(b"index "), lines) {
            Some(i) => {
                let s = String::from_utf8_lossy(&lines[i]).into_owned();
                let forms = [
                    "0000000",
                    "e69de29",
                    "ffffff",
                    "zzzz",
                    "",
                    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
                ];
                let a = rng.pick(&forms);
                let b = rng.pick(&forms);
                let rest = s
                    .trim_end()
                    .split(' ')
                    .nth(2)
                    .map(|m| format!(" {m}"))
                    .unwrap_or_default();
                lines[i] = format!("index {a}..{b}{rest}\n").into_bytes();
                "index line"
            }
            None => "none",
        },
    }
}

/// 0–4 mutations (none for about a third of the cases); returns the names.
pub fn mutate(rng: &mut Rng, patch: &[u8]) -> (Vec<u8>, Vec<&'static str>) {
    let mut lines = split_lines(patch);
    let count = match rng.below(9) {
        0..=2 => 0,
        3..=5 => 1,
        6 | 7 => 2,
        _ => 3 + rng.below(2),
    };
    let mut names = Vec::new();
    for _ in 0..count {
        names.push(mutate_once(rng, &mut lines));
    }
    (lines.concat(), names)
}
