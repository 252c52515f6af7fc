//! The common head and tail of two byte strings, found with `memcmp` a block at a time:
//! what the patch writers skip before diffing (a small edit to a large file costs the edited
//! region only).
//!
//! ```text
//! common_prefix(b"abcx", b"abcy") == 3      common_suffix(b"xabc", b"yabc") == 3
//! ```
//!
//! (Crate-private, so not a doctest; the unit test below checks both against a byte-by-byte
//! count.)

/// How many bytes are compared at once: slice equality is a `memcmp`, many times faster than
/// comparing byte by byte (which a zip of two iterators does, 10-20% of a finalize whose
/// patch has a 24 MB file); the first differing block is then searched byte by byte.
const BLOCK: usize = 256;

/// The length of the longest common prefix of `a` and `b`.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The length of the longest common suffix of `a` and `b`.
pub(crate) fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0; // bytes known equal at the end
    while i + BLOCK <= n && a[n - i - BLOCK..n - i] == b[n - i - BLOCK..n - i] {
        i += BLOCK;
    }
    i + a[..n - i]
        .iter()
        .rev()
        .zip(b[..n - i].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_and_suffix_match_a_byte_by_byte_count() {
        let naive_p = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let naive_s = |a: &[u8], b: &[u8]| {
            a.iter()
                .rev()
                .zip(b.iter().rev())
                .take_while(|(x, y)| x == y)
                .count()
        };
        let base: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        for len_a in [0, 1, 255, 256, 257, 511, 512, 1000, 2000] {
            for len_b in [0, 1, 256, 700, 2000] {
                for flip in [
                    None,
                    Some(0),
                    Some(1),
                    Some(255),
                    Some(256),
                    Some(600),
                    Some(1999),
                ] {
                    let a = base[..len_a].to_vec();
                    let mut b = base[..len_b].to_vec();
                    if let Some(f) = flip.filter(|&f| f < b.len()) {
                        b[f] ^= 0xff;
                    }
                    assert_eq!(
                        common_prefix(&a, &b),
                        naive_p(&a, &b),
                        "{len_a} {len_b} {flip:?}"
                    );
                    // Tails aligned at the end: flip counted from the end too.
                    let mut c = base[2000 - len_b..].to_vec();
                    if let Some(f) = flip.filter(|&f| f < c.len()) {
                        let at = c.len() - 1 - f;
                        c[at] ^= 0xff;
                    }
                    let d = base[2000 - len_a..].to_vec();
                    assert_eq!(
                        common_suffix(&d, &c),
                        naive_s(&d, &c),
                        "{len_a} {len_b} {flip:?}"
                    );
                }
            }
        }
    }
}
