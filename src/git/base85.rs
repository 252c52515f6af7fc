//! Git's base85, as used in the lines of a `GIT binary patch`: each line is a length
//! character (`A`–`Z` for 1–26 bytes, `a`–`z` for 27–52), then the bytes in groups of four,
//! each written as five base85 digits. [`encode_lines`] writes such lines and [`decode_line`]
//! reads one back.

/// The most bytes one line carries.
const LINE_BYTES: usize = 52;

/// git's base85 alphabet (base85.c).
const ALPHABET: &[u8; 85] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

/// Encodes `data` as git does: each group of four bytes (the last one zero-padded) as a
/// big-endian number written in five base85 digits, most significant first.
fn encode(out: &mut Vec<u8>, data: &[u8]) {
    for group in data.chunks(4) {
        let mut acc: u32 = 0;
        for i in 0..4 {
            acc = (acc << 8) | u32::from(group.get(i).copied().unwrap_or(0));
        }
        let mut digits = [0u8; 5];
        for d in digits.iter_mut().rev() {
            *d = ALPHABET[(acc % 85) as usize];
            acc /= 85;
        }
        out.extend_from_slice(&digits);
    }
}

/// Writes `data` as base85 lines of at most 52 bytes each, every line ending in `\n`.
///
/// ```
/// use patchbox::git::base85::{decode_line, encode_lines};
/// let mut text = Vec::new();
/// encode_lines(&mut text, &[0x78, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
/// assert_eq!(text, b"HcmV?d00001\n");
/// let mut back = Vec::new();
/// decode_line(&text[..text.len() - 1], &mut back).unwrap();
/// assert_eq!(back, [0x78, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
/// ```
pub fn encode_lines(out: &mut Vec<u8>, data: &[u8]) {
    for chunk in data.chunks(LINE_BYTES) {
        // chunk.len() is 1..=52, so the length character is 'A'..='Z' or 'a'..='z'.
        let n = chunk.len() as u8;
        out.push(if n <= 26 { b'A' + n - 1 } else { b'a' + n - 27 });
        encode(out, chunk);
        out.push(b'\n');
    }
}

/// Decodes one line of a `GIT binary patch` (its length character, then base85 groups; the
/// newline excluded) into `out`. The error is a short reason.
///
/// ```
/// let mut out = Vec::new();
/// patchbox::git::base85::decode_line(b"D00000", &mut out).unwrap();
/// assert_eq!(out, [0, 0, 0, 0]);
/// assert!(patchbox::git::base85::decode_line(b"E00000", &mut out).is_err());
/// ```
pub fn decode_line(line: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), &'static str> {
    fn digit(c: u8) -> Option<u32> {
        ALPHABET.iter().position(|&a| a == c).map(|p| p as u32)
    }
    let (&len_ch, enc) = line.split_first().ok_or("empty line")?;
    let byte_len = match len_ch {
        b'A'..=b'Z' => usize::from(len_ch - b'A') + 1,
        b'a'..=b'z' => usize::from(len_ch - b'a') + 27,
        _ => return Err("bad length character"),
    };
    if enc.is_empty() || enc.len() % 5 != 0 {
        return Err("line length is not a multiple of 5");
    }
    let max = enc.len() / 5 * 4;
    if byte_len > max || byte_len + 4 <= max {
        return Err("length character does not match the line");
    }
    let mut left = byte_len;
    for group in enc.chunks(5) {
        let mut acc: u32 = 0;
        for (k, &c) in group.iter().enumerate() {
            let d = digit(c).ok_or("invalid base85 character")?;
            if k == 4 {
                acc = acc
                    .checked_mul(85)
                    .and_then(|a| a.checked_add(d))
                    .ok_or("base85 overflow")?;
            } else {
                acc = acc * 85 + d;
            }
        }
        let bytes = acc.to_be_bytes();
        let n = left.min(4);
        out.extend_from_slice(&bytes[..n]);
        left -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_matches_git() {
        // The zlib stream of an empty blob, as `git diff --binary` writes it.
        let mut out = Vec::new();
        encode(&mut out, &[0x78, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
        assert_eq!(out, b"cmV?d00001");
    }

    #[test]
    fn decode_known() {
        // "hello" deflated by git: just check decode of a line encoding 4 zero bytes.
        let mut out = Vec::new();
        decode_line(b"D00000", &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 0]);
        let mut out = Vec::new();
        assert!(decode_line(b"E00000", &mut out).is_err());
        assert!(decode_line(b"D0000", &mut out).is_err());
        assert!(decode_line(b"D~~~~~", &mut out).is_err());
    }

    #[test]
    fn lines_round_trip() {
        for len in [0usize, 1, 3, 4, 26, 27, 52, 53, 104, 1000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut text = Vec::new();
            encode_lines(&mut text, &data);
            let mut back = Vec::new();
            for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                decode_line(line, &mut back).unwrap();
            }
            assert_eq!(back, data, "{len}");
        }
    }
}
