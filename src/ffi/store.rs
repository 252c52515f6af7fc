//! The bridge behind `<patchbox/store.hpp>`: what the library keeps under its root, for
//! engines that reach it without a shell — pending patches (list, read, drop), and sessions
//! (list, prune), and their JSON records (the documents of `docs/json.md`, as the CLI prints
//! them). Applying a pending patch is in [`super::apply`], beside `apply_patch`.

use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use super::{core, guarded, path_from};
use crate::session::{layout, pending, recover};

#[cxx::bridge(namespace = "patchbox::bridge")]
mod bridge {
    /// `pending::PendingEntry` across the bridge; an absent pre-image directory is
    /// `has_preimages == false`.
    struct FfiPending {
        id: String,
        patch_path: Vec<u8>,
        has_preimages: bool,
        preimages: Vec<u8>,
        session: String,
        delegation: String,
        project: Vec<u8>,
        created: u64,
        recovered: bool,
        abandoned: bool,
    }

    /// `recover::SessionStatus` across the bridge; an unknown project is empty.
    struct FfiSession {
        id: String,
        live: bool,
        project: Vec<u8>,
        sandboxes: Vec<String>,
        pending: usize,
    }

    /// `recover::PruneReport` across the bridge.
    struct FfiPruneReport {
        pruned: Vec<String>,
        recovered: Vec<FfiStorePath>,
        live: Vec<String>,
        errors: Vec<String>,
        deferred: Vec<String>,
        shared_layers_removed: usize,
    }

    /// A path as raw bytes.
    struct FfiStorePath {
        bytes: Vec<u8>,
    }

    /// `remote::RemoteEntry` across the bridge.
    struct FfiStored {
        id: String,
        session: String,
        delegation: String,
        name: String,
        host: String,
        project: Vec<u8>,
        created: u64,
        recovered: bool,
        abandoned: bool,
        files: u64,
        patch_bytes: u64,
    }

    /// One line of `remote::push::PushReport`: the local id, and the id in the store (or
    /// the error that kept it local).
    struct FfiPushed {
        local_id: String,
        outcome: String,
    }

    /// `remote::push::PushReport` across the bridge.
    struct FfiPushReport {
        pushed: Vec<FfiPushed>,
        failed: Vec<FfiPushed>,
    }

    extern "Rust" {
        fn list_pending(root: &[u8]) -> Result<Vec<FfiPending>>;
        fn read_pending(root: &[u8], id: &str) -> Result<Vec<u8>>;
        fn drop_pending(root: &[u8], id: &str) -> Result<()>;
        fn list_sessions(root: &[u8]) -> Result<Vec<FfiSession>>;
        fn prune_sessions(root: &[u8]) -> Result<FfiPruneReport>;
        fn list_stored(store: &str) -> Result<Vec<FfiStored>>;
        fn read_stored(store: &str, id: &str) -> Result<Vec<u8>>;
        fn drop_stored(store: &str, id: &str) -> Result<()>;
        fn push_pending(root: &[u8], store: &str) -> Result<FfiPushReport>;
        fn pending_records_json(root: &[u8]) -> Result<String>;
        fn pending_record_json(root: &[u8], id: &str) -> Result<String>;
        fn stored_record_json(store: &str, id: &str) -> Result<String>;
        fn sessions_json(root: &[u8]) -> Result<String>;
    }
}

/// The root named by C++ (empty: the default root).
pub(super) fn root_from(root: &[u8]) -> crate::Result<PathBuf> {
    if root.is_empty() {
        layout::default_root()
    } else {
        Ok(path_from(root))
    }
}

fn bytes(p: PathBuf) -> Vec<u8> {
    p.into_os_string().into_vec()
}

fn list_pending(root: &[u8]) -> Result<Vec<bridge::FfiPending>, String> {
    guarded(|| {
        let list = core(root_from(root).and_then(|r| pending::list(&r)))?;
        Ok(list
            .into_iter()
            .map(|e| bridge::FfiPending {
                session: e.session().to_string(),
                id: e.id,
                patch_path: bytes(e.patch_path),
                has_preimages: e.preimages.is_some(),
                preimages: e.preimages.map(bytes).unwrap_or_default(),
                delegation: e.meta.delegation,
                project: bytes(e.meta.project),
                created: e.meta.created,
                recovered: e.meta.recovered,
                abandoned: e.meta.abandoned,
            })
            .collect())
    })
}

fn read_pending(root: &[u8], id: &str) -> Result<Vec<u8>, String> {
    guarded(|| core(root_from(root).and_then(|r| pending::read(&r, id))))
}

fn drop_pending(root: &[u8], id: &str) -> Result<(), String> {
    guarded(|| core(root_from(root).and_then(|r| pending::drop_pending(&r, id))))
}

fn list_sessions(root: &[u8]) -> Result<Vec<bridge::FfiSession>, String> {
    guarded(|| {
        let list = core(root_from(root).and_then(|r| recover::list_sessions(&r)))?;
        Ok(list
            .into_iter()
            .map(|s| bridge::FfiSession {
                id: s.id,
                live: s.live,
                project: s.project.map(bytes).unwrap_or_default(),
                sandboxes: s.sandboxes,
                pending: s.pending,
            })
            .collect())
    })
}

fn prune_sessions(root: &[u8]) -> Result<bridge::FfiPruneReport, String> {
    guarded(|| {
        let r = core(root_from(root).and_then(|r| recover::prune(&r)))?;
        Ok(bridge::FfiPruneReport {
            pruned: r.pruned,
            recovered: r
                .recovered
                .into_iter()
                .map(|p| bridge::FfiStorePath { bytes: bytes(p) })
                .collect(),
            live: r.live,
            errors: r.errors,
            deferred: r.deferred,
            shared_layers_removed: r.shared_layers_removed,
        })
    })
}

/// The pending store in the object store `url`.
pub(super) fn remote_of(url: &str) -> crate::Result<crate::session::remote::RemotePending> {
    crate::session::remote::RemotePending::open(&crate::store::StoreUrl::parse(url)?)
}

fn list_stored(store: &str) -> Result<Vec<bridge::FfiStored>, String> {
    guarded(|| {
        let list = core(remote_of(store).and_then(|s| s.list()))?;
        Ok(list
            .into_iter()
            .map(|e| {
                let project = e.record.project_bytes();
                let r = e.record;
                bridge::FfiStored {
                    id: e.id,
                    session: r.session,
                    delegation: r.delegation,
                    name: r.name,
                    host: r.host,
                    project,
                    created: r.created,
                    recovered: r.recovered,
                    abandoned: r.abandoned,
                    files: r.files,
                    patch_bytes: r.patch_bytes,
                }
            })
            .collect())
    })
}

fn read_stored(store: &str, id: &str) -> Result<Vec<u8>, String> {
    guarded(|| core(remote_of(store).and_then(|s| s.read(id))))
}

fn drop_stored(store: &str, id: &str) -> Result<(), String> {
    guarded(|| core(remote_of(store).and_then(|s| s.drop_pending(id))))
}

fn push_pending(root: &[u8], store: &str) -> Result<bridge::FfiPushReport, String> {
    guarded(|| {
        let r = core(root_from(root).and_then(|root| {
            let s = remote_of(store)?;
            crate::session::remote::push::push(&root, &s, None)
        }))?;
        Ok(bridge::FfiPushReport {
            pushed: r
                .pushed
                .into_iter()
                .map(|(local_id, outcome)| bridge::FfiPushed { local_id, outcome })
                .collect(),
            failed: r
                .failed
                .into_iter()
                .map(|(local_id, e)| bridge::FfiPushed {
                    local_id,
                    outcome: e.to_string(),
                })
                .collect(),
        })
    })
}

/// Every pending patch's record as the JSON array `patchbox pending list --json` prints.
fn pending_records_json(root: &[u8]) -> Result<String, String> {
    guarded(|| {
        let recs = core(root_from(root).and_then(|r| crate::records::pending_records(&r)))?;
        Ok(crate::records::to_json(&recs))
    })
}

/// One pending patch's record, its patch text included, as `pending show --json` prints it.
fn pending_record_json(root: &[u8], id: &str) -> Result<String, String> {
    guarded(|| {
        let rec = core(root_from(root).and_then(|r| {
            let e = pending::find(&r, id)?;
            crate::records::PendingRecord::of(&e, true)
        }))?;
        Ok(crate::records::to_json(&rec))
    })
}

/// One pending patch's record in the object store, its patch text included, as `pending show
/// --json --store URL` prints it.
fn stored_record_json(store: &str, id: &str) -> Result<String, String> {
    guarded(|| {
        let rec = core(remote_of(store).and_then(|s| {
            let e = s.find(id)?;
            let patch = s.patch_of(&e)?;
            Ok(crate::records::PendingRecord::of_stored(
                store, &e, &patch, true,
            ))
        }))?;
        Ok(crate::records::to_json(&rec))
    })
}

/// The sessions' records as `patchbox sessions --json` prints them.
fn sessions_json(root: &[u8]) -> Result<String, String> {
    guarded(|| {
        let list = core(root_from(root).and_then(|r| recover::list_sessions(&r)))?;
        let recs: Vec<crate::records::SessionRecord> = list.iter().map(Into::into).collect();
        Ok(crate::records::to_json(&recs))
    })
}
