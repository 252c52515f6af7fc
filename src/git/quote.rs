//! Git's C-style quoting of paths, both ways: [`quote_path`] as `git diff` writes names in
//! patch headers (`core.quotePath=true`), and [`unquote_c_style`] for quoted names in patches
//! and in `objects/info/alternates`.

/// git's quoting of a path in patch headers (`core.quotePath=true`).
///
/// Returns `prefix` followed by `path`. When the path contains `"`, `\`, a control character,
/// DEL or any byte `>= 0x80`, the whole token (prefix included) is put in double quotes with
/// C-style escapes: `\a \b \t \n \v \f \r \" \\`, and three-digit octal for the other bytes.
///
/// ```
/// use patchbox::git::quote::quote_path;
/// assert_eq!(quote_path("a/", b"src/lib.rs"), b"a/src/lib.rs");
/// assert_eq!(quote_path("a/", b"has space"), b"a/has space");
/// assert_eq!(quote_path("a/", "tést".as_bytes()), br#""a/t\303\251st""#);
/// assert_eq!(quote_path("b/", b"x\ty\"z"), br#""b/x\ty\"z""#);
/// ```
pub fn quote_path(prefix: &str, path: &[u8]) -> Vec<u8> {
    let needs = |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x7f;
    let full: Vec<u8> = prefix.bytes().chain(path.iter().copied()).collect();
    if !full.iter().any(|&b| needs(b)) {
        return full;
    }
    let mut out = Vec::with_capacity(full.len() + 8);
    out.push(b'"');
    for &b in &full {
        let esc = match b {
            0x07 => Some(b'a'),
            0x08 => Some(b'b'),
            b'\t' => Some(b't'),
            b'\n' => Some(b'n'),
            0x0b => Some(b'v'),
            0x0c => Some(b'f'),
            b'\r' => Some(b'r'),
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            _ => None,
        };
        match esc {
            Some(c) => out.extend_from_slice(&[b'\\', c]),
            None if needs(b) => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            None => out.push(b),
        }
    }
    out.push(b'"');
    out
}

/// Decodes a git C-quoted string starting at `s[0] == '"'`. Returns the bytes and the number of
/// input bytes consumed (including both quotes), or `None` if it is not a valid quoted string.
///
/// ```
/// use patchbox::git::quote::unquote_c_style;
/// let (name, used) = unquote_c_style(br#""a/\303\244 \"x\"\tb" rest"#).unwrap();
/// assert_eq!(name, b"a/\xc3\xa4 \"x\"\tb");
/// assert_eq!(used, 21);
/// ```
pub fn unquote_c_style(s: &[u8]) -> Option<(Vec<u8>, usize)> {
    if s.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < s.len() {
        let c = s[i];
        match c {
            b'"' => return Some((out, i + 1)),
            b'\\' => {
                let e = *s.get(i + 1)?;
                i += 2;
                let v = match e {
                    b'a' => 7,
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'v' => 11,
                    b'f' => 12,
                    b'r' => b'\r',
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'0'..=b'3' => {
                        let d1 = *s.get(i)?;
                        let d2 = *s.get(i + 1)?;
                        if !(b'0'..=b'7').contains(&d1) || !(b'0'..=b'7').contains(&d2) {
                            return None;
                        }
                        i += 2;
                        ((e - b'0') << 6) | ((d1 - b'0') << 3) | (d2 - b'0')
                    }
                    _ => return None,
                };
                out.push(v);
            }
            b'\n' => return None,
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_octal_and_del() {
        assert_eq!(quote_path("a/", b"\xff\x7f\x01"), br#""a/\377\177\001""#);
        assert_eq!(quote_path("a/", b"back\\slash"), br#""a/back\\slash""#);
    }

    #[test]
    fn unquote_escapes() {
        assert_eq!(
            unquote_c_style(br#""a\tb\\c\303\251\"""#).unwrap().0,
            b"a\tb\\c\xc3\xa9\""
        );
        assert!(unquote_c_style(br#""a\q""#).is_none());
        assert!(unquote_c_style(br#""a\3""#).is_none());
        assert!(unquote_c_style(b"\"abc").is_none());
    }

    #[test]
    fn unquote_stops_at_the_closing_quote() {
        assert_eq!(unquote_c_style(br#""a"b""#), Some((b"a".to_vec(), 3)));
        assert!(unquote_c_style(b"\"a\nb\"").is_none());
        assert!(unquote_c_style(b"abc").is_none());
    }

    #[test]
    fn quote_then_unquote_round_trips() {
        let all: Vec<u8> = (1..=255).collect();
        let q = quote_path("", &all);
        assert_eq!(unquote_c_style(&q), Some((all, q.len())));
    }
}
