//! Making sandboxes: the session's base snapshot, taken once by the first sandbox (tracked
//! files that match the git index become blobs of the user's object store, the rest is copied
//! into `base/`), and each sandbox, copied fresh from the base or chained from a predecessor
//! into a hidden `.creating-<id>` directory, its manifest kept beside it, then renamed to
//! `d-<id>`: crash recovery never mistakes a half-made copy for a delegation's work.

use crate::id::DelegationId;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::*;
use crate::fs::Timestamp;
use crate::isolation::layered;

impl Sandbox {
    /// The sandbox `d-<id>` (`dir`) of the session whose base is `base`: a copy (with the
    /// manifest of its copy) or an overlay (with its layers).
    pub(super) fn new(
        id: &DelegationId,
        dir: &StatePath,
        base: &Base,
        manifest: Manifest,
        overlay: Option<overlay::OverlaySb>,
    ) -> Sandbox {
        let mode = match &overlay {
            None => IsolationMode::Copy,
            Some(o) => overlay::Decided::Overlay(o.backend).mode(),
        };
        Sandbox {
            info: SandboxInfo {
                path: dir.as_path().to_path_buf(),
                delegation_id: id.clone(),
                base_dir: base.dir.clone(),
                mode,
            },
            manifest,
            last_touched: Mutex::new(Vec::new()),
            overlay,
        }
    }
}

impl SandboxManager {
    /// Takes the base snapshot once. Tracked files that match the git index are recorded
    /// as blobs of the user's object store instead of being copied (see [`crate::tree::base`]);
    /// the rest is copied into `base/`.
    pub(super) fn ensure_base(&self) -> Result<Arc<SessionBase>> {
        let mut guard = self.base.lock();
        if let Some(b) = guard.as_ref() {
            return Ok(b.clone());
        }
        let exclude = vec![self.root.clone()];
        let sel = select::select_project(&self.project, &exclude)?;
        let odb = sel
            .git
            .as_ref()
            .and_then(|g| ObjectStore::open(&g.git_dir).ok())
            .map(Arc::new);
        let index_mtime = sel
            .git
            .as_ref()
            .and_then(|g| std::fs::metadata(&g.index_file).ok())
            .map(|m| Timestamp::mtime_of(&m));
        let mut skipped: Vec<(PathBuf, String)> = sel
            .skipped
            .iter()
            .map(|s| (s.rel.as_path().to_path_buf(), s.reason.to_string()))
            .collect();
        // A file git converts (attributes, core.autocrlf) may differ from its blob whatever
        // its stat data says: it is always copied from the work tree.
        let lookup = odb.as_deref().map(ObjectStore::lookup);
        // When the user's store holds the tree of the whole index (its cache-tree), it holds
        // every blob of the index's entries: a store holds what its trees reach, except a
        // partial clone's, which fetches them when needed. Then no blob is looked up.
        let held = match (sel.index_tree, &odb) {
            (Some(k), Some(odb)) => k.held_by(odb),
            _ => None,
        };
        let all_held = held.is_some() && sel.git.as_ref().is_some_and(|r| !r.promisor);
        let src_of = |e: &select::Selected| match (&e.index, e.stat, &lookup, index_mtime) {
            (Some(ix), Some(st), Some(odb), Some(t))
                if !e.converted
                    && ix.stat_matches(&st, t)
                    && (all_held || odb.contains(&ix.oid)) =>
            {
                BaseSrc::Blob(ix.oid, st)
            }
            _ => BaseSrc::Dir,
        };
        // One object-store lookup per tracked file, when needed: split over the cores, which
        // share one list of packs (`lookup`) rather than take it per file.
        let srcs = crate::cores::parallel_map(&sel.entries, 4096, src_of);
        drop(lookup);
        // The index entries of the tracked files copied (few, in most sessions): the private
        // repository takes their blob ids from them rather than read the index again.
        let copies = sel
            .entries
            .iter()
            .zip(&srcs)
            .filter(|(e, s)| **s == BaseSrc::Dir && matches!(e.kind, select::Kind::File { .. }))
            .filter_map(|(e, _)| {
                let ix = e.index.as_ref().filter(|ix| ix.stage() == 0)?;
                Some((e.rel.clone(), ix.clone()))
            })
            .collect();
        let view_index = git_view::ViewIndex {
            copies,
            kept_out: sel.kept_out,
            mtime: index_mtime,
            known_tree: held,
        };
        let mut nodes: Vec<Node> = sel
            .entries
            .into_iter()
            .map(|e| Node {
                rel: e.rel,
                kind: match e.kind {
                    select::Kind::File { executable } => NodeKind::File { executable },
                    select::Kind::Symlink => NodeKind::Symlink,
                },
            })
            .collect();
        // Collected in place, in the selection's buffer (six times a node's size): given
        // back before the session's other lists are made (16 MB on the Linux tree).
        nodes.shrink_to_fit();
        let to_copy: Vec<&Node> = nodes
            .iter()
            .zip(&srcs)
            .filter(|(_, s)| **s == BaseSrc::Dir)
            .map(|(n, _)| n)
            .collect();
        let tmp = self.path_in_state_dir(Path::new(".creating-base"))?;
        let dir = self.path_in_state_dir(Path::new(layout::BASE_DIR))?;
        state_dir::remove_tree(&tmp)?;
        state_dir::create_dir_new(&tmp)?;
        // What an overlay create will compare with the project's shared layer, hashed on a
        // second core while the copies are made.
        let digest = || {
            let blobs = layered::layered_blobs(sel.git.is_some(), &srcs)?;
            layered::digest_of(&nodes, &srcs, &blobs)
        };
        let (blob_digest, copied) = crate::cores::beside(digest, || {
            snapshot::copy_tree(
                &self.project,
                &to_copy,
                &tmp,
                self.progress.as_deref(),
                None,
            )
        });
        let out = match copied {
            Ok(o) => o,
            Err(e) => {
                let _ = state_dir::remove_tree(&tmp);
                return Err(e);
            }
        };
        let gone: std::collections::HashSet<&RelPath> =
            out.skipped.iter().map(|(r, _)| r).collect();
        // Nothing gone (the usual case): the lists stay as they are, none rebuilt.
        let (nodes, srcs) = if gone.is_empty() {
            (nodes, srcs)
        } else {
            nodes
                .into_iter()
                .zip(srcs)
                .filter(|(n, s)| *s != BaseSrc::Dir || !gone.contains(&n.rel))
                .unzip()
        };
        skipped.extend(
            out.skipped
                .iter()
                .map(|(r, why)| (r.as_path().to_path_buf(), why.clone())),
        );
        let base = Base {
            dir: dir.as_path().to_path_buf(),
            nodes,
            srcs,
            odb,
            project: Some(self.project.clone()),
        };
        release_freed_memory();
        state_dir::rename(&tmp, &dir)?;
        let links_into_project = base
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Symlink)
            .filter(|n| {
                std::fs::read_link(self.project.join(n.rel.as_path()))
                    .is_ok_and(|t| t.is_absolute() && t.starts_with(&self.project))
            })
            .map(|n| n.rel.as_path().to_path_buf())
            .collect();
        let sb = Arc::new(SessionBase {
            base,
            repo: sel.git,
            skipped,
            links_into_project,
            blob_list_written: Mutex::new(false),
            view_index,
            blob_digest,
        });
        *guard = Some(sb.clone());
        Ok(sb)
    }

    /// Writes the session's blob list (`base.blobs`: which files of the snapshot are blobs
    /// of the user's store, for crash recovery) unless it is written. Every create calls it
    /// before its sandbox appears (its record or its name), so recovery never finds a
    /// sandbox without the list; an overlay create writes it beside `.lower/`, on another
    /// core.
    pub(super) fn write_blob_list(&self, sbase: &SessionBase) -> Result<()> {
        let mut written = sbase.blob_list_written.lock();
        if !*written {
            let p = self.path_in_state_dir(Path::new(crate::tree::base::BLOBS_FILE))?;
            sbase.base.write_blob_list(&p)?;
            *written = true;
        }
        Ok(())
    }

    pub(super) fn build_sandbox(
        &self,
        id: &DelegationId,
        dir: &StatePath,
        chain_from: Option<&SandboxInfo>,
    ) -> Result<Sandbox> {
        // The first create decides the isolation (an overlay probe: a mount and an unmount,
        // mostly waiting on the kernel) while the project is selected; later ones find it
        // decided.
        let known = *self.decided.lock();
        let (sbase, decided) = match known {
            Some(d) => (self.ensure_base(), Ok(d)),
            None => {
                let (decided, sbase) =
                    crate::cores::beside(|| self.decide(), || self.ensure_base());
                (sbase, decided)
            }
        };
        let sbase = sbase?;
        let base = &sbase.base;
        if let overlay::Decided::Overlay(backend) = decided? {
            let prev = chain_from.map(|p| self.lookup(p)).transpose()?;
            // A predecessor made as a copy (never, in one session) is chained by copying.
            if prev.as_ref().is_none_or(|p| p.overlay.is_some()) {
                return self.build_overlay(id, dir, prev.as_ref(), backend, &sbase);
            }
        }
        self.write_blob_list(&sbase)?;
        let tmp = self.path_in_state_dir(Path::new(&format!(".creating-{id}")))?;
        let marker = self.path_in_state_dir(Path::new(&format!(".clock-{id}")))?;
        state_dir::remove_tree(&tmp)?;
        state_dir::create_dir_new(&tmp)?;
        let made = match chain_from {
            None => self.copy_fresh(base, &tmp),
            Some(prev_info) => self.copy_chained(base, prev_info, &tmp),
        };
        // A sandbox of a git project is a work tree of a private repository (`.git`,
        // which no listing of a sandbox includes).
        let made = made.and_then(|(entries, newest)| {
            self.add_git_repo(&sbase, &tmp, Some(git_view::Made::Entries(&entries)))?;
            Ok((entries, newest))
        });
        let (entries, newest) = match made {
            Ok(x) => x,
            Err(e) => {
                let _ = state_dir::remove_tree(&tmp);
                return Err(e);
            }
        };
        // The manifest is kept beside the sandbox before the sandbox appears under its name,
        // so recovery of a crashed session diffs by stat data as finalize does (without it,
        // recovery compares by content: slower, as exact).
        let manifest_file =
            self.path_in_state_dir(Path::new(&format!("{}{id}", layout::MANIFEST_PREFIX)))?;
        let made = snapshot::clock_stamp_after(&marker, newest).and_then(|stamp| {
            let manifest = Manifest::new(entries, stamp);
            state_dir::write_scratch(&manifest_file, &manifest.encode())?;
            state_dir::rename(&tmp, dir)?;
            Ok(manifest)
        });
        let manifest = match made {
            Ok(m) => m,
            Err(e) => {
                let _ = state_dir::remove_tree(&tmp);
                let _ = state_dir::remove_file(&manifest_file);
                return Err(e);
            }
        };
        Ok(Sandbox::new(id, dir, base, manifest, None))
    }

    /// A fresh copy of the base: copies in `base/` are copied; blobs are copied from the
    /// project when its file still has the stat data verified at snapshot time, and written
    /// from the object store otherwise.
    pub(super) fn copy_fresh(
        &self,
        base: &Base,
        tmp: &StatePath,
    ) -> Result<(Vec<ManifestEntry>, Timestamp)> {
        let mut dir_nodes = Vec::new();
        let mut blob_nodes = Vec::new();
        let mut blob_idx = Vec::new();
        for (i, (n, s)) in base.nodes.iter().zip(&base.srcs).enumerate() {
            match s {
                BaseSrc::Dir => dir_nodes.push(n),
                BaseSrc::Blob(..) => {
                    blob_nodes.push(n);
                    blob_idx.push(i);
                }
            }
        }
        let total = base.nodes.len() as u64;
        let offset_progress = |offset: u64| {
            self.progress.clone().map(|cb| {
                move |p: snapshot::Progress| {
                    cb(snapshot::Progress {
                        files_done: p.files_done + offset,
                        files_total: total,
                        bytes_done: p.bytes_done,
                    })
                }
            })
        };
        let pa = offset_progress(0);
        let a = snapshot::copy_tree(
            &base.dir,
            &dir_nodes,
            tmp,
            pa.as_ref().map(|f| f as &snapshot::ProgressFn),
            None,
        )?;
        let pb = offset_progress(dir_nodes.len() as u64);
        let b = self.copy_blobs(
            base,
            &blob_idx,
            tmp,
            pb.as_ref().map(|f| f as &snapshot::ProgressFn),
        )?;
        let mut entries = Vec::with_capacity(base.nodes.len());
        let mut newest = Timestamp::default();
        let mut push = |rel: &RelPath, key: StatKey, entries: &mut Vec<ManifestEntry>| {
            newest = newest.max(key.ctime);
            entries.push(ManifestEntry {
                rel: rel.clone(),
                key,
                same_as_base: true,
            });
        };
        for (n, k) in dir_nodes.iter().zip(a.keys) {
            if let Some(k) = k {
                push(&n.rel, k, &mut entries);
            }
        }
        for (n, key) in blob_nodes.iter().zip(b) {
            push(&n.rel, key, &mut entries);
        }
        Ok((entries, newest))
    }

    /// Copies the blob nodes `idx` (indices into `base.nodes`, in path order) into `dst`:
    /// from the project when its file still has the stat data verified at snapshot time,
    /// else written from the object store with the recorded mtime. Returns each one's stat
    /// data in `dst`, in the order of `idx`.
    pub(super) fn copy_blobs(
        &self,
        base: &Base,
        idx: &[usize],
        dst: &StatePath,
        progress: Option<&snapshot::ProgressFn>,
    ) -> Result<Vec<StatKey>> {
        let nodes: Vec<&Node> = idx.iter().map(|&i| &base.nodes[i]).collect();
        let stats: Vec<LStat> = idx
            .iter()
            .map(|&i| match base.srcs[i] {
                BaseSrc::Blob(_, st) => Ok(st),
                BaseSrc::Dir => Err(Error::io(
                    "copy a blob node",
                    base.nodes[i].rel.as_path(),
                    std::io::Error::other("not a blob node"),
                )),
            })
            .collect::<Result<_>>()?;
        let verify = |k: usize, m: &std::fs::Metadata| LStat::from_metadata(m) == stats[k];
        let b = snapshot::copy_tree(&self.project, &nodes, dst, progress, Some(&verify))?;
        let mut keys = Vec::with_capacity(idx.len());
        for (((n, k), &i), st) in nodes.iter().zip(b.keys).zip(idx).zip(&stats) {
            let key = match k {
                Some(k) => k,
                // The user changed (or removed) the file since the snapshot: the base
                // content is the blob.
                None => {
                    let data = crate::tree::diff::BaseSource::read(base, i)?;
                    let dst = dst.child(&n.rel);
                    state_dir::remove_file(&dst)?;
                    let mode = if matches!(n.kind, NodeKind::File { executable: true }) {
                        0o755
                    } else {
                        0o644
                    };
                    state_dir::write_file_replace(&dst, &data, mode)?;
                    state_dir::set_mtime(&dst, st.mtime)?;
                    StatKey::from_metadata(&state_dir::symlink_metadata(&dst)?)
                }
            };
            keys.push(key);
        }
        Ok(keys)
    }

    /// A copy of a predecessor sandbox's current state; nodes it had already changed are
    /// marked as differing from base, so the new sandbox's patch stays cumulative.
    fn copy_chained(
        &self,
        base: &Base,
        prev_info: &SandboxInfo,
        tmp: &StatePath,
    ) -> Result<(Vec<ManifestEntry>, Timestamp)> {
        let prev = self.lookup(prev_info)?;
        // One listing serves both the diff (what the predecessor changed) and the copy.
        let listing = snapshot::list_tree(&prev.info.path)?;
        let d = diff::diff_listing(
            &base.nodes,
            base,
            &prev.info.path,
            &listing,
            Some(&prev.manifest),
            &|_| false,
        )?;
        let changed: std::collections::HashSet<RelPath> =
            d.changes.into_iter().map(|c| c.rel).collect();
        let nodes: Vec<Node> = listing.into_iter().map(|(n, _)| n).collect();
        let out =
            snapshot::copy_tree(&prev.info.path, &nodes, tmp, self.progress.as_deref(), None)?;
        let mut newest = Timestamp::default();
        let entries = nodes
            .into_iter()
            .zip(out.keys)
            .filter_map(|(n, k)| {
                let key = k?;
                newest = newest.max(key.ctime);
                Some(ManifestEntry {
                    same_as_base: !changed.contains(&n.rel),
                    rel: n.rel,
                    key,
                })
            })
            .collect();
        Ok((entries, newest))
    }
}
