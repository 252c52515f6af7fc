//! Object ids and hexadecimal: the one place that hashes an object the way git does
//! ([`object_id`], [`blob_id`]), the [`ObjectId`] type those ids travel as, and the one hex
//! codec ([`to_hex`], [`from_hex`], [`ObjectId::from_hex`]) used for ids in patches and
//! `base.blobs`, and for the hex-encoded paths of undo records.
//!
//! Inside the library an object id is an [`ObjectId`]: twenty bytes, compared and hashed as
//! such. Hexadecimal appears only at the edges, where an id is written into text (a patch's
//! `index` line, a journal or record line, a JSON record, a file name) or read back from it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha1::{Digest, Sha1};

/// A git object id (SHA-1): twenty bytes.
///
/// Its text form ([`Display`](fmt::Display), [`ObjectId::to_hex`], serde) is 40 lowercase
/// hex digits, the form git prints and the records on disk hold; parsing accepts either case.
/// The default is git's null id (twenty zero bytes), which names no object.
///
/// ```
/// use patchbox::git::oid::{blob_id, ObjectId};
/// let empty = blob_id(b"");
/// assert_eq!(empty.to_string(), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
/// assert_eq!("E69DE29BB2D1D6434B8B29AE775AD8C2E48C5391".parse::<ObjectId>(), Ok(empty));
/// assert!(empty.starts_with_hex("e69de2"));
/// assert_eq!(
///     serde_json::to_string(&empty).unwrap(),
///     "\"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\""
/// );
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId([u8; 20]);

impl ObjectId {
    /// The id with these twenty bytes (as git stores it in an index, a tree or a pack).
    pub const fn from_bytes(bytes: [u8; 20]) -> ObjectId {
        ObjectId(bytes)
    }

    /// The twenty bytes.
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// Parses 40 hex digits (either case); `None` for anything else.
    ///
    /// ```
    /// use patchbox::git::oid::ObjectId;
    /// let hex = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"; // the empty blob
    /// assert_eq!(ObjectId::from_hex(hex).map(|id| id.to_hex()).as_deref(), Some(hex));
    /// assert!(ObjectId::from_hex("xyz").is_none());
    /// assert!(ObjectId::from_hex(&"g".repeat(40)).is_none());
    /// ```
    pub fn from_hex(hex: &str) -> Option<ObjectId> {
        ObjectId::from_hex_bytes(hex.as_bytes())
    }

    /// [`ObjectId::from_hex`] over bytes, for records parsed in place (no UTF-8 check).
    ///
    /// ```
    /// use patchbox::git::oid::ObjectId;
    /// let id = ObjectId::from_hex_bytes(b"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    /// assert_eq!(id, ObjectId::from_hex("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"));
    /// assert!(ObjectId::from_hex_bytes(b"e69de29b").is_none());
    /// ```
    pub fn from_hex_bytes(hex: &[u8]) -> Option<ObjectId> {
        if hex.len() != 40 {
            return None;
        }
        let mut out = [0u8; 20];
        decode_hex(hex, &mut out)?;
        Some(ObjectId(out))
    }

    /// The 40 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }

    /// Whether the hex form starts with `prefix` (lowercase digits), as an abbreviated id in
    /// a patch's `index` line does.
    pub fn starts_with_hex(&self, prefix: &str) -> bool {
        self.to_hex().starts_with(prefix)
    }
}

impl From<[u8; 20]> for ObjectId {
    fn from(bytes: [u8; 20]) -> ObjectId {
        ObjectId(bytes)
    }
}

impl From<ObjectId> for [u8; 20] {
    fn from(id: ObjectId) -> [u8; 20] {
        id.0
    }
}

impl AsRef<[u8]> for ObjectId {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({self})")
    }
}

/// The error of parsing an [`ObjectId`]: the text is not 40 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseObjectIdError;

impl fmt::Display for ParseObjectIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a 40-digit hexadecimal object id")
    }
}

impl std::error::Error for ParseObjectIdError {}

impl FromStr for ObjectId {
    type Err = ParseObjectIdError;
    fn from_str(s: &str) -> Result<ObjectId, ParseObjectIdError> {
        ObjectId::from_hex(s).ok_or(ParseObjectIdError)
    }
}

impl Serialize for ObjectId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ObjectId, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        ObjectId::from_hex(&s).ok_or_else(|| serde::de::Error::custom(ParseObjectIdError))
    }
}

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
/// use patchbox::git::oid::{object_id, ObjectKind};
/// assert_eq!(
///     object_id(ObjectKind::Blob, b"").to_hex(),
///     "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
/// );
/// ```
pub fn object_id(kind: ObjectKind, data: &[u8]) -> ObjectId {
    let mut h = Sha1::new();
    h.update(kind.as_str().as_bytes());
    h.update(b" ");
    h.update(data.len().to_string().as_bytes());
    h.update([0u8]);
    h.update(data);
    ObjectId(h.finalize().into())
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
    blob_id(data).to_hex()
}

/// The git blob id of `data` (SHA-1 of `blob <len>\0` + data).
///
/// ```
/// use patchbox::git::oid::blob_id;
/// assert_eq!(blob_id(b"hello\n").to_hex(), "ce013625030ba8dba906f756967f9e9ca394464a");
/// ```
pub fn blob_id(data: &[u8]) -> ObjectId {
    object_id(ObjectKind::Blob, data)
}

/// Formats bytes as lowercase hexadecimal, two digits a byte (an object id gives 40).
///
/// ```
/// assert_eq!(patchbox::git::oid::to_hex(&[0xab; 20]), "ab".repeat(20));
/// assert_eq!(patchbox::git::oid::to_hex(b"a/b"), "612f62");
/// ```
pub fn to_hex(bytes: &[u8]) -> String {
    let mut v = Vec::with_capacity(bytes.len() * 2);
    push_hex(bytes, &mut v);
    // Only ASCII digits and letters were pushed.
    String::from_utf8(v).unwrap_or_default()
}

/// Appends the lowercase hexadecimal of `bytes` to `out`: [`to_hex`] without an allocation
/// per call, for writers of long lists of ids and paths.
///
/// ```
/// let mut out = b"id ".to_vec();
/// patchbox::git::oid::push_hex(b"a/b", &mut out);
/// assert_eq!(out, b"id 612f62");
/// ```
pub fn push_hex(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let start = out.len();
    out.resize(start + bytes.len() * 2, 0);
    for (d, &b) in out[start..].chunks_exact_mut(2).zip(bytes) {
        d[0] = HEX[(b >> 4) as usize];
        d[1] = HEX[(b & 15) as usize];
    }
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

/// Decodes `2 * out.len()` hex digits of `hex` into `out`.
fn decode_hex(hex: &[u8], out: &mut [u8]) -> Option<()> {
    // One table read per digit and one check per byte: manifests and blob lists decode
    // ~100k ids at a time.
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (hi, lo) = (NIBBLE[pair[0] as usize], NIBBLE[pair[1] as usize]);
        bad |= hi | lo;
        *o = (hi << 4) | (lo & 15);
    }
    (bad & 0x80 == 0).then_some(())
}

/// Each byte's value as a hex digit (either case), or `0x80` when it is not one.
const NIBBLE: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => 0x80,
        };
        c += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let mut oid = [0u8; 20];
        for (i, b) in oid.iter_mut().enumerate() {
            *b = (i * 13) as u8;
        }
        let id = ObjectId::from_bytes(oid);
        assert_eq!(to_hex(&oid), id.to_hex());
        assert_eq!(ObjectId::from_hex(&to_hex(&oid)), Some(id));
        assert_eq!(ObjectId::from_hex(&to_hex(&oid).to_uppercase()), Some(id));
        assert!(ObjectId::from_hex(&"g".repeat(40)).is_none());
        assert!(ObjectId::from_hex(&"a".repeat(39)).is_none());
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
