//! Delivering a pending patch where the manager's options say: the local pending store, or
//! an object store shared with other machines — and, when that store fails, keeping the
//! work locally so nothing is lost.

use std::path::PathBuf;

use super::SandboxManager;
use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::id::{DelegationId, IntoId};
use crate::session::pending;
use crate::session::provenance::Provenance;

/// Where [`SandboxManager::deliver_pending_patch`] put a pending patch.
#[derive(Debug)]
pub enum Delivery {
    /// In the local pending store (no object store configured): the patch file.
    Local(PathBuf),
    /// In the object store.
    Stored {
        /// Its id there, `<session>/<name>`.
        id: String,
        /// The store's URL.
        url: String,
    },
    /// The object store failed; the patch (with its pre-images) is kept in the local
    /// pending store, from where `pending push` (or [`crate::session::remote::push`])
    /// uploads it later.
    Kept {
        /// The local patch file.
        path: PathBuf,
        /// Why the store refused or could not be reached.
        error: Error,
    },
}

impl SandboxManager {
    /// Stores `patch` as a pending patch of `delegation_id` where [`super::Options::store`]
    /// says, with the base versions of the files it touched (for a 3-way apply elsewhere).
    /// Without a store this is [`SandboxManager::write_pending_patch`]. With one, a failure
    /// of the store keeps the patch locally ([`Delivery::Kept`]); an error is returned only
    /// when it could be kept nowhere.
    ///
    /// `delegation_id` is a [`DelegationId`] or text parsed as one here.
    pub fn deliver_pending_patch(
        &self,
        delegation_id: impl IntoId<DelegationId>,
        patch: &[u8],
    ) -> Result<Delivery> {
        self.deliver_pending_patch_with(delegation_id, patch, &Provenance::default())
    }

    /// [`deliver_pending_patch`](Self::deliver_pending_patch) with what produced the work
    /// (command, directory, exit status, times), kept in the local meta or the store's record
    /// and, when the store fails, in the patch kept locally.
    pub fn deliver_pending_patch_with(
        &self,
        delegation_id: impl IntoId<DelegationId>,
        patch: &[u8],
        provenance: &Provenance,
    ) -> Result<Delivery> {
        let delegation_id = delegation_id.into_id()?;
        let Some(remote) = &self.remote else {
            return self
                .write_pending_inner(&delegation_id, patch, false, provenance)
                .map(Delivery::Local);
        };
        let (meta, touched, sbase) = self.pending_parts(&delegation_id, false, provenance)?;
        let read = |rel: &RelPath| match sbase.as_ref() {
            Some(sb) => sb.base.preimage(rel),
            None => Ok(None),
        };
        let pre = sbase
            .as_ref()
            .map(|_| (touched.as_slice(), &read as pending::PreimageFn));
        match remote.store_inner(&self.session_id, &delegation_id, &meta, patch, pre, false) {
            Ok(id) => Ok(Delivery::Stored {
                id,
                url: remote.url(),
            }),
            Err(error @ Error::Store(_)) => {
                let path = self.write_pending_inner(&delegation_id, patch, false, provenance)?;
                Ok(Delivery::Kept { path, error })
            }
            Err(e) => Err(e),
        }
    }
}
