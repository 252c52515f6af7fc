//! Object ids and hexadecimal: the one place that hashes an object the way git does
//! ([`object_id`], [`blob_id_hex`]) and the one hex codec ([`to_hex`], [`from_hex`],
//! [`oid_from_hex`]) used for ids in patches and `base.blobs`, and for the hex-encoded paths of
//! undo records.

use sha1::{Digest, Sha1};

/// The four object types of git.
///
/// ```
/// use patchbox::git::oid::ObjectKind;
/// assert_eq!(ObjectKind::Blob.as_str(), "blob");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A commit.
    Commit,
    /// A tree (directory listing).
    Tree,
    /// A blob (file content).
    Blob,
    /// An annotated tag.
    Tag,
}

impl ObjectKind {
    /// The name git uses in object headers (`"blob"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Commit => "commit",
            ObjectKind::Tree => "tree",
            ObjectKind::Blob => "blob",
            ObjectKind::Tag => "tag",
        }
    }

    pub(crate) fn from_name(name: &[u8]) -> Option<ObjectKind> {
        match name {
            b"commit" => Some(ObjectKind::Commit),
            b"tree" => Some(ObjectKind::Tree),
            b"blob" => Some(ObjectKind::Blob),
            b"tag" => Some(ObjectKind::Tag),
            _ => None,
        }
    }

    pub(crate) fn from_pack_type(t: u8) -> Option<ObjectKind> {
        match t {
            1 => Some(ObjectKind::Commit),
            2 => Some(ObjectKind::Tree),
            3 => Some(ObjectKind::Blob),
            4 => Some(ObjectKind::Tag),
            _ => None,
        }
    }
}

/// The id git gives an object of `kind` with `data`: SHA-1 of `<kind> <len>\0` + data.
///
/// ```
/// use patchbox::git::oid::{object_id, to_hex, ObjectKind};
/// assert_eq!(
///     to_hex(&object_id(ObjectKind::Blob, b"")),
///     "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
/// );
/// ```
pub fn object_id(kind: ObjectKind, data: &[u8]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(kind.as_str().as_bytes());
    h.update(b" ");
    h.update(data.len().to_string().as_bytes());
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

/// The git blob id of `data` (SHA-1 of `blob <len>\0` + data) as 40 lowercase hex digits, as
/// it appears in a patch's `index` line.
///
/// ```
/// use patchbox::git::oid::blob_id_hex;
/// assert_eq!(blob_id_hex(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
/// assert_eq!(blob_id_hex(b"hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
/// ```
pub fn blob_id_hex(data: &[u8]) -> String {
    to_hex(&object_id(ObjectKind::Blob, data))
}

/// Formats bytes as lowercase hexadecimal, two digits a byte (an object id gives 40).
///
/// ```
/// assert_eq!(patchbox::git::oid::to_hex(&[0xab; 20]), "ab".repeat(20));
/// assert_eq!(patchbox::git::oid::to_hex(b"a/b"), "612f62");
/// ```
pub fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// Parses hexadecimal (either case, two digits a byte) back into bytes: the inverse of
/// [`to_hex`]. `None` for an odd number of digits or anything that is not a hex digit.
///
/// ```
/// use patchbox::git::oid::from_hex;
/// assert_eq!(from_hex("612F62").as_deref(), Some(&b"a/b"[..]));
/// assert_eq!(from_hex(""), Some(vec![]));
/// assert!(from_hex("abc").is_none());
/// assert!(from_hex("+f").is_none());
/// ```
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    let b = hex.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let mut out = vec![0u8; b.len() / 2];
    decode_hex(b, &mut out)?;
    Some(out)
}

/// Parses a 40-digit hexadecimal object id (either case).
///
/// ```
/// use patchbox::git::oid::{oid_from_hex, to_hex};
/// let hex = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"; // the empty blob
/// let oid = oid_from_hex(hex).unwrap();
/// assert_eq!(to_hex(&oid), hex);
/// assert!(oid_from_hex("xyz").is_none());
/// ```
pub fn oid_from_hex(hex: &str) -> Option<[u8; 20]> {
    let b = hex.as_bytes();
    if b.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    decode_hex(b, &mut out)?;
    Some(out)
}

/// Decodes `2 * out.len()` hex digits of `hex` into `out`.
fn decode_hex(hex: &[u8], out: &mut [u8]) -> Option<()> {
    let nib = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = (nib(pair[0])? << 4) | nib(pair[1])?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let mut oid = [0u8; 20];
        for (i, b) in oid.iter_mut().enumerate() {
            *b = (i * 13) as u8;
        }
        assert_eq!(oid_from_hex(&to_hex(&oid)), Some(oid));
        assert_eq!(oid_from_hex(&to_hex(&oid).to_uppercase()), Some(oid));
        assert!(oid_from_hex(&"g".repeat(40)).is_none());
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&all)), Some(all));
        assert!(from_hex("0g").is_none());
        assert!(from_hex("é0").is_none());
    }

    #[test]
    fn blob_id_matches_a_plain_sha1_of_the_blob_header() {
        for data in [&b""[..], b"hello\n", &[0u8, 255, 10][..]] {
            let mut h = Sha1::new();
            h.update(format!("blob {}\0", data.len()).as_bytes());
            h.update(data);
            let want: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(blob_id_hex(data), want);
        }
    }
}
