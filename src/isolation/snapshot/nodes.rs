//! A snapshot's listing (`nodes`): per node, a kind byte (`f` file, `x` executable, `l`
//! symlink), the path, NUL. Written once when the snapshot is prepared, so a manager
//! reopened later knows the snapshot's files without walking them (a layered snapshot's
//! files are not all in its own directory, so no walk could list them).

use std::os::unix::ffi::OsStrExt;

use crate::fs::RelPath;
use crate::tree::snapshot::{Node, NodeKind};

/// The listing of `nodes` (sorted by path bytes, as a base's are).
pub(super) fn encode(nodes: &[Node]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in nodes {
        out.push(match n.kind {
            NodeKind::File { executable: false } => b'f',
            NodeKind::File { executable: true } => b'x',
            NodeKind::Symlink => b'l',
        });
        out.extend_from_slice(n.rel.as_path().as_os_str().as_bytes());
        out.push(0);
    }
    out
}

/// The nodes of a listing; `None` when it is not one this module wrote (an unknown kind, a
/// bad path, or not sorted).
pub(super) fn decode(data: &[u8]) -> Option<Vec<Node>> {
    let mut out = Vec::new();
    if data.is_empty() {
        return Some(out);
    }
    let body = data.strip_suffix(&[0])?;
    for rec in body.split(|&b| b == 0) {
        let (&k, rel) = rec.split_first()?;
        let kind = match k {
            b'f' => NodeKind::File { executable: false },
            b'x' => NodeKind::File { executable: true },
            b'l' => NodeKind::Symlink,
            _ => return None,
        };
        out.push(Node {
            rel: RelPath::from_bytes(rel).ok()?,
            kind,
        });
    }
    // The base's nodes are sorted by path bytes; a listing that is not was not ours.
    out.windows(2)
        .all(|w| w[0].rel.as_bytes() < w[1].rel.as_bytes())
        .then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_round_trip() {
        let nodes = vec![
            Node {
                rel: RelPath::from_bytes(b"a b").unwrap(),
                kind: NodeKind::File { executable: true },
            },
            Node {
                rel: RelPath::from_bytes(b"d/l").unwrap(),
                kind: NodeKind::Symlink,
            },
            Node {
                rel: RelPath::from_bytes(b"d/x\n").unwrap(),
                kind: NodeKind::File { executable: false },
            },
        ];
        let back = decode(&encode(&nodes)).unwrap();
        assert_eq!(back.len(), 3);
        assert!(back
            .iter()
            .zip(&nodes)
            .all(|(a, b)| a.rel == b.rel && a.kind == b.kind));
        assert!(decode(b"qa\0").is_none());
        assert_eq!(decode(b"").map(|v| v.len()), Some(0));
    }
}
