//! Git's delta format, the one decoder for both of its uses: `OFS_DELTA`/`REF_DELTA` entries
//! of a pack (`crate::git::odb`) and `delta` hunks of a `GIT binary patch`
//! ([`crate::patch::parse`]).
//!
//! A delta starts with the base size and the result size (little-endian base-128 varints),
//! followed by copy opcodes (high bit set: copy a range of the base) and insert opcodes
//! (1–127: insert that many literal bytes); opcode 0 is reserved. Every inconsistency is a
//! [`DeltaError`], never a panic, and the result is never allowed past its declared size.

/// Upper bound for the allocation made from the declared result size before any data is
/// produced; the buffer grows past it only as real data arrives.
const PREALLOC_MAX: u64 = 16 << 20;

/// Why a delta could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeltaError {
    /// The delta was made against a base of `expected` bytes; the one given has `actual`.
    BaseSize {
        /// The base size the delta declares.
        expected: u64,
        /// The size of the base it was applied to.
        actual: u64,
    },
    /// The delta is malformed (a short reason: truncated op, copy outside the base, …).
    Corrupt(&'static str),
}

impl std::fmt::Display for DeltaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeltaError::BaseSize { expected, actual } => write!(
                f,
                "delta expects a base of {expected} bytes, the base has {actual}"
            ),
            DeltaError::Corrupt(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for DeltaError {}

/// Applies the git delta `delta` to `base`. A result larger than `max_size` bytes is refused
/// (pass `u64::MAX` for no limit beyond the declared size).
///
/// ```
/// use patchbox::git::delta::{apply, DeltaError};
/// // base size 5, result size 8; copy 5 bytes from offset 0; insert "!!!".
/// let delta = [5u8, 8, 0x80 | 0x10, 5, 3, b'!', b'!', b'!'];
/// assert_eq!(apply(b"hello", &delta, u64::MAX).unwrap(), b"hello!!!");
/// assert!(matches!(apply(b"hell", &delta, u64::MAX), Err(DeltaError::BaseSize { .. })));
/// assert!(apply(b"hello", &delta, 7).is_err());
/// ```
pub fn apply(base: &[u8], delta: &[u8], max_size: u64) -> Result<Vec<u8>, DeltaError> {
    let bad = DeltaError::Corrupt;
    let mut pos = 0usize;
    let src_size = varint(delta, &mut pos)?;
    if src_size != base.len() as u64 {
        return Err(DeltaError::BaseSize {
            expected: src_size,
            actual: base.len() as u64,
        });
    }
    let dst_size = varint(delta, &mut pos)?;
    if dst_size > max_size {
        return Err(bad("result too large"));
    }
    // Never trust the declared size for the allocation.
    let mut out: Vec<u8> = Vec::with_capacity(dst_size.min(PREALLOC_MAX) as usize);
    while pos < delta.len() {
        let cmd = delta[pos];
        pos += 1;
        if cmd & 0x80 != 0 {
            let mut off: u64 = 0;
            let mut size: u64 = 0;
            for (i, bit) in [0x01u8, 0x02, 0x04, 0x08].iter().enumerate() {
                if cmd & bit != 0 {
                    let b = *delta.get(pos).ok_or(bad("truncated copy"))?;
                    pos += 1;
                    off |= u64::from(b) << (8 * i);
                }
            }
            for (i, bit) in [0x10u8, 0x20, 0x40].iter().enumerate() {
                if cmd & bit != 0 {
                    let b = *delta.get(pos).ok_or(bad("truncated copy"))?;
                    pos += 1;
                    size |= u64::from(b) << (8 * i);
                }
            }
            if size == 0 {
                size = 0x10000;
            }
            let end = off.checked_add(size).ok_or(bad("copy overflows"))?;
            if end > base.len() as u64 {
                return Err(bad("copy outside the base"));
            }
            if out.len() as u64 + size > dst_size {
                return Err(bad("result longer than declared"));
            }
            out.extend_from_slice(&base[off as usize..end as usize]);
        } else if cmd != 0 {
            let n = usize::from(cmd);
            let lit = delta.get(pos..pos + n).ok_or(bad("truncated insert"))?;
            if out.len() as u64 + n as u64 > dst_size {
                return Err(bad("result longer than declared"));
            }
            out.extend_from_slice(lit);
            pos += n;
        } else {
            return Err(bad("reserved opcode 0"));
        }
    }
    if out.len() as u64 != dst_size {
        return Err(bad("result shorter than declared"));
    }
    Ok(out)
}

/// Reads a little-endian base-128 size from the delta header; at most nine bytes (63 bits).
fn varint(d: &[u8], pos: &mut usize) -> Result<u64, DeltaError> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *d.get(*pos).ok_or(DeltaError::Corrupt("truncated header"))?;
        *pos += 1;
        if shift > 56 {
            return Err(DeltaError::Corrupt("size too large"));
        }
        v |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn delta(src: u64, tgt: u64, ops: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        varint(src, &mut d);
        varint(tgt, &mut d);
        d.extend_from_slice(ops);
        d
    }

    #[test]
    fn delta_copy_and_insert() {
        let base = b"hello world";
        // copy offset 6 len 5 ("world"), insert " ", copy offset 0 len 5 ("hello")
        let d = delta(11, 11, &[0x91, 6, 5, 1, b' ', 0x90, 5]);
        assert_eq!(apply(base, &d, u64::MAX).unwrap(), b"world hello");
    }

    #[test]
    fn delta_copy_size_zero_means_64k() {
        let base: Vec<u8> = (0..0x10000u32).map(|i| i as u8).collect();
        let d = delta(0x10000, 0x10000, &[0x80]);
        assert_eq!(apply(&base, &d, u64::MAX).unwrap(), base);
    }

    #[test]
    fn delta_errors() {
        let base = b"abc";
        assert!(apply(base, &delta(4, 1, &[1, b'x']), u64::MAX).is_err()); // wrong base size
        assert!(apply(base, &delta(3, 1, &[0]), u64::MAX).is_err()); // reserved opcode
        assert!(apply(base, &delta(3, 4, &[0x91, 1, 3]), u64::MAX).is_err()); // copy past base
        assert!(apply(base, &delta(3, 2, &[3, b'x']), u64::MAX).is_err()); // truncated insert
        assert!(apply(base, &delta(3, 1, &[2, b'x', b'y']), u64::MAX).is_err()); // exceeds target
        assert!(apply(base, &delta(3, 5, &[1, b'x']), u64::MAX).is_err()); // short of target
        assert!(apply(base, &delta(3, 1, &[0x91]), u64::MAX).is_err()); // truncated copy
        assert!(apply(base, &[0xff; 12], u64::MAX).is_err()); // varint overflow
        assert!(apply(base, &[], u64::MAX).is_err());
        let huge = delta(3, u64::MAX, &[0x90, 3]);
        assert!(apply(base, &huge, u64::MAX).is_err());
    }

    #[test]
    fn delta_size_limit() {
        let base = b"abc";
        let d = delta(3, 6, &[0x90, 3, 0x90, 3]);
        assert_eq!(apply(base, &d, 6).unwrap(), b"abcabc");
        assert_eq!(
            apply(base, &d, 5),
            Err(DeltaError::Corrupt("result too large"))
        );
        assert_eq!(
            apply(b"ab", &d, 6),
            Err(DeltaError::BaseSize {
                expected: 3,
                actual: 2
            })
        );
    }
}
