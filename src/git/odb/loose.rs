//! Loose objects (`objects/xx/<38 hex>`): a zlib stream of `<type> <len>\0` and the
//! content.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::bufread::ZlibDecoder;

use super::{git_err, stream_err, PREALLOC_MAX};
use crate::error::{Error, IoContext, Result};
use crate::git::oid::{ObjectId, ObjectKind};

pub(super) fn loose_path(objects: &Path, oid: &ObjectId) -> PathBuf {
    let hex = oid.to_hex();
    objects.join(&hex[..2]).join(&hex[2..])
}

/// Reads a loose object; `Ok(None)` when the file does not exist.
pub(super) fn read_loose(path: &Path) -> Result<Option<(ObjectKind, Vec<u8>)>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open loose object", path, e)),
    };
    let flen = file.metadata().ctx("stat loose object", path)?.len();
    let mut dec = ZlibDecoder::new(BufReader::with_capacity(
        (flen.clamp(64, 64 << 10)) as usize,
        file,
    ));
    let mut head = [0u8; 64];
    let mut got = 0;
    let nul = loop {
        if let Some(p) = head[..got].iter().position(|&b| b == 0) {
            break p;
        }
        if got == head.len() {
            return Err(git_err(path, "loose object header is too long"));
        }
        let n = dec
            .read(&mut head[got..])
            .map_err(|e| stream_err(path, "inflate loose object", e))?;
        if n == 0 {
            return Err(git_err(path, "loose object is truncated"));
        }
        got += n;
    };
    let bad = || git_err(path, "malformed loose object header");
    let h = &head[..nul];
    let sp = h.iter().position(|&b| b == b' ').ok_or_else(bad)?;
    let kind = ObjectKind::from_name(&h[..sp]).ok_or_else(bad)?;
    let digits = &h[sp + 1..];
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let size = digits
        .iter()
        .fold(0u64, |a, &d| a * 10 + u64::from(d - b'0'));
    if size / 1032 > flen + 64 {
        return Err(git_err(path, format!("size {size} is impossible")));
    }
    let mut data = Vec::with_capacity(size.min(PREALLOC_MAX) as usize);
    data.extend_from_slice(&head[nul + 1..got]);
    if (data.len() as u64) < size {
        let rest = size - data.len() as u64;
        (&mut dec)
            .take(rest + 1)
            .read_to_end(&mut data)
            .map_err(|e| stream_err(path, "inflate loose object", e))?;
    }
    if data.len() as u64 != size {
        return Err(git_err(
            path,
            format!("loose object has {} bytes, header says {size}", data.len()),
        ));
    }
    Ok(Some((kind, data)))
}
