//! `GIT binary patch` blocks: a forward and an optional reverse hunk, each `literal` or
//! `delta`, base85 lines of zlib data.
//!
//! What a hostile hunk can make the parser allocate is bounded by the data actually present
//! and by [`MAX_BINARY_SIZE`]: the inflated size must match the header's exactly.

use std::io::Read;

use super::{trim_eol, Parser};
use crate::error::Result;
use crate::git::base85;
use crate::patch::model::{BinaryHunk, BinaryKind, BinaryPatch, MAX_BINARY_SIZE};

impl Parser<'_> {
    /// Parses the blocks after `GIT binary patch`, starting at `i`.
    pub(super) fn binary(&self, mut i: usize) -> Result<(BinaryPatch, usize)> {
        let forward = self.binary_hunk(&mut i)?.ok_or_else(|| {
            Self::err(
                i,
                "expected 'literal <size>' or 'delta <size>' after 'GIT binary patch'",
            )
        })?;
        let reverse = self.binary_hunk(&mut i)?;
        Ok((BinaryPatch::Data { forward, reverse }, i))
    }

    fn binary_hunk(&self, i: &mut usize) -> Result<Option<BinaryHunk>> {
        let n = self.lines.len();
        if *i >= n {
            return Ok(None);
        }
        let l = trim_eol(self.lines[*i]);
        let (kind, size) = if let Some(v) = l.strip_prefix(b"literal ") {
            (BinaryKind::Literal, v)
        } else if let Some(v) = l.strip_prefix(b"delta ") {
            (BinaryKind::Delta, v)
        } else {
            return Ok(None);
        };
        let header_idx = *i;
        let size: u64 = std::str::from_utf8(size)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Self::err(header_idx, "bad binary hunk size"))?;
        if size > MAX_BINARY_SIZE {
            return Err(Self::err(header_idx, "binary hunk too large"));
        }
        *i += 1;
        let mut deflated = Vec::new();
        loop {
            // A binary hunk ends with a blank line; input ending before it, or inside a line,
            // is a cut patch (git: "corrupt binary patch"), even if the data inflates.
            if *i >= n || !self.lines[*i].ends_with(b"\n") {
                return Err(Self::err(
                    (*i).min(n),
                    format!(
                        "corrupt binary patch: the input ends inside the binary hunk at line {} (truncated patch)",
                        header_idx + 1
                    ),
                ));
            }
            // Only the newline is taken off: a CR before it (a CRLF-converted patch) makes
            // the data line or the closing blank line corrupt, as in git (parse_binary_hunk);
            // git then stops reading the patch and applies only what came before.
            let raw = self.lines[*i];
            let l = &raw[..raw.len() - 1];
            if l.is_empty() {
                *i += 1;
                break;
            }
            base85::decode_line(l, &mut deflated)
                .map_err(|why| Self::err(*i, format!("corrupt binary patch: {why}")))?;
            *i += 1;
        }
        let mut data = Vec::new();
        let mut dec = flate2::read::ZlibDecoder::new(&deflated[..]).take(size + 1);
        dec.read_to_end(&mut data).map_err(|e| {
            Self::err(
                header_idx,
                format!("corrupt binary patch: cannot inflate: {e}"),
            )
        })?;
        if data.len() as u64 != size {
            return Err(Self::err(
                header_idx,
                format!(
                    "corrupt binary patch: inflates to {} bytes, header says {size}",
                    data.len()
                ),
            ));
        }
        Ok(Some(BinaryHunk { kind, data }))
    }
}
