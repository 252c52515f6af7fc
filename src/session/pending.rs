//! The pending store: patches nobody accepted yet, kept for review.
//!
//! A pending patch lives in its session's `pending/` directory as `<delegation>.patch`,
//! next to `<delegation>.meta` (where it came from, whether it was recovered after a crash)
//! and `<delegation>.pre/` (the base versions of the files it touches, so it can still be
//! merged 3-way after its session is gone). The patch file is written last and atomically:
//! its presence is what makes an entry exist, and it is never partial.
//!
//! Pending patches are never removed automatically; only [`drop_pending`] (or applying one)
//! does. Their id across sessions is `<session-id>/<delegation-id>`.

use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::apply::store::UndoStore;
use crate::apply::{ApplyOptions, ApplyReport, Outcome};
use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::fs::state_dir::{self, StateDir, StatePath};
use crate::git::oid::{from_hex, to_hex};
use crate::id::DelegationId;
use crate::session::layout;
use crate::session::provenance::Provenance;
use crate::tree::snapshot::NodeKind;

/// Name of the pending directory inside a session.
pub const PENDING_DIR: &str = "pending";

/// Reads the base version of a path for storing it as a pre-image: its kind and content,
/// or `None` when the path did not exist in base.
pub type PreimageFn<'a> = &'a dyn Fn(&RelPath) -> Result<Option<(NodeKind, Vec<u8>)>>;

/// Facts stored beside a pending patch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingMeta {
    /// The session that produced it.
    pub session: String,
    /// The delegation that produced it.
    pub delegation: String,
    /// The project it applies to.
    pub project: PathBuf,
    /// Seconds since the Unix epoch when it was stored.
    pub created: u64,
    /// True when it was recovered from a session that died before finishing.
    pub recovered: bool,
    /// True when its manager ended (dropped, unwinding included) with the sandbox neither
    /// completed nor discarded: the work was kept as a crash would have kept it.
    pub abandoned: bool,
    /// What produced it, as far as its producer said (empty for recovered work).
    pub provenance: Provenance,
    /// The pending patch this one is the rest of, after a partial apply took the other part.
    pub split_from: Option<String>,
}

impl PendingMeta {
    fn encode(&self) -> Vec<u8> {
        let hex = to_hex(self.project.as_os_str().as_bytes());
        let mut out = format!(
            "session={}\ndelegation={}\nproject_hex={}\ncreated={}\nrecovered={}\nabandoned={}\n",
            self.session, self.delegation, hex, self.created, self.recovered, self.abandoned
        );
        if !self.provenance.is_empty() {
            // One line of JSON: serde_json escapes newlines.
            if let Ok(j) = serde_json::to_string(&self.provenance) {
                out.push_str(&format!("provenance={j}\n"));
            }
        }
        if let Some(s) = &self.split_from {
            out.push_str(&format!("split_from={s}\n"));
        }
        out.into_bytes()
    }

    fn decode(text: &str) -> PendingMeta {
        let mut m = PendingMeta::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            match k {
                "session" => m.session = v.to_string(),
                "delegation" => m.delegation = v.to_string(),
                "project_hex" => {
                    // A damaged value leaves the project unknown (empty), never a wrong path.
                    let bytes = from_hex(v).unwrap_or_default();
                    m.project = PathBuf::from(std::ffi::OsString::from_vec(bytes));
                }
                "created" => m.created = v.parse().unwrap_or(0),
                "recovered" => m.recovered = v == "true",
                "abandoned" => m.abandoned = v == "true",
                "provenance" => m.provenance = serde_json::from_str(v).unwrap_or_default(),
                "split_from" => m.split_from = Some(v.to_string()),
                _ => {}
            }
        }
        m
    }
}

/// One pending patch found on disk.
#[derive(Clone, Debug)]
pub struct PendingEntry {
    /// `<session-id>/<delegation-id>`, unique under a root.
    pub id: String,
    /// The patch file.
    pub patch_path: PathBuf,
    /// The directory of pre-images, if one was stored.
    pub preimages: Option<PathBuf>,
    /// What the `.meta` file says (defaults when it is missing).
    pub meta: PendingMeta,
}

/// Longest suffix [`write_pending`] adds to a delegation id to make a free name (`.1000`).
const MAX_SUFFIX: usize = 5;

/// Stores `patch` as a pending patch of `meta.delegation` in `session_dir` and returns the
/// patch file's path.
///
/// The entry is named after the delegation, `<id>.patch`; when that name is taken (the
/// reference engine names every top-level delegation `d1`), the next free one of `<id>.2`,
/// `<id>.3`, … — nothing is ever overwritten, also against a concurrent writer: each file of
/// the entry is put in place with a rename that refuses to replace. The `.meta` is written
/// first (it claims the name), then the pre-images, then the patch file, whose presence is
/// what makes the entry exist.
///
/// `preimages`: the paths whose base versions to keep beside it, and a reader giving each
/// one's base node (`None`: the path is new).
pub fn write_pending(
    session_dir: &Path,
    meta: &PendingMeta,
    patch: &[u8],
    preimages: Option<(&[RelPath], PreimageFn<'_>)>,
) -> Result<PathBuf> {
    write_pending_in(&StateDir::open(session_dir)?, meta, patch, preimages)
}

/// [`write_pending`] into a session directory already open: every file of the entry is
/// made beneath its descriptor, so a `pending/` swapped for a symlink at any moment makes
/// the write fail instead of landing elsewhere.
///
/// `meta.delegation` is text here: it is parsed as a [`DelegationId`] (the boundary).
pub fn write_pending_in(
    session: &StateDir,
    meta: &PendingMeta,
    patch: &[u8],
    preimages: Option<(&[RelPath], PreimageFn<'_>)>,
) -> Result<PathBuf> {
    let id = DelegationId::parse(&meta.delegation)?;
    write_pending_as(session, &id, meta, patch, preimages)
}

/// [`write_pending_in`] for a delegation id already parsed: `id` names the files, and
/// `meta` (whose `delegation` is `id`) is stored beside them.
pub(crate) fn write_pending_as(
    session: &StateDir,
    id: &DelegationId,
    meta: &PendingMeta,
    patch: &[u8],
    preimages: Option<(&[RelPath], PreimageFn<'_>)>,
) -> Result<PathBuf> {
    debug_assert_eq!(id.as_str(), meta.delegation);
    if id.as_str().len() + MAX_SUFFIX > layout::MAX_ID_LEN {
        // Refused up front, so a long id never finds its names exhausted later.
        return Err(Error::InvalidId {
            id: id.to_string(),
            reason: "too long to store as a pending patch (at most 123 bytes)",
        });
    }
    let dir = session.join(Path::new(PENDING_DIR))?;
    state_dir::create_dir_all(&dir)?;
    let at = |name: String| RelPath::new(name).map(|n| dir.child(&n));
    let pre_tmp = match preimages {
        Some((paths, read)) => Some(fill_preimages(
            &at(format!(".{id}.pre.{}.tmp", ulid::Ulid::new()))?,
            paths,
            read,
        )?),
        None => None,
    };
    let encoded = meta.encode();
    let result = (|| {
        for n in 1..=1000u32 {
            let stem = if n == 1 {
                id.to_string()
            } else {
                format!("{id}.{n}")
            };
            let (meta_path, pre_path, patch_path) = (
                at(format!("{stem}.meta"))?,
                at(format!("{stem}.pre"))?,
                at(format!("{stem}.patch"))?,
            );
            let taken = |p: &StatePath| state_dir::exists(p);
            if taken(&patch_path)? || taken(&meta_path)? || taken(&pre_path)? {
                continue;
            }
            if !state_dir::write_atomic_new(&meta_path, &encoded)? {
                continue;
            }
            // From here the name is ours; a lost race on a later file gives it back.
            if let Some(tmp) = &pre_tmp {
                if !state_dir::rename_noreplace(tmp, &pre_path)? {
                    state_dir::remove_file(&meta_path)?;
                    continue;
                }
            }
            if !state_dir::write_atomic_new(&patch_path, patch)? {
                if let Some(tmp) = &pre_tmp {
                    state_dir::rename(&pre_path, tmp)?;
                }
                state_dir::remove_file(&meta_path)?;
                continue;
            }
            return Ok(patch_path.as_path().to_path_buf());
        }
        Err(Error::Pending {
            id: id.to_string(),
            reason: "no free name left to store it (1,000 pending patches of this id)".into(),
        })
    })();
    if let Some(tmp) = &pre_tmp {
        // Gone already when it was renamed into place.
        let _ = state_dir::remove_tree(tmp);
    }
    result
}

/// Writes the base versions of `paths` into the new directory `tmp` and returns it.
fn fill_preimages(tmp: &StatePath, paths: &[RelPath], read: PreimageFn<'_>) -> Result<StatePath> {
    state_dir::create_dir_all(tmp)?;
    let filled = (|| {
        for rel in paths {
            let Some((kind, data)) = read(rel)? else {
                continue; // added by the patch: no pre-image
            };
            if let Some(parent) = rel.parent() {
                state_dir::create_dir_all(&tmp.child(&parent))?;
            }
            let dst = tmp.child(rel);
            match kind {
                NodeKind::Symlink => {
                    state_dir::create_symlink(Path::new(std::ffi::OsStr::from_bytes(&data)), &dst)?
                }
                NodeKind::File { executable } => state_dir::write_file_replace(
                    &dst,
                    &data,
                    if executable { 0o755 } else { 0o644 },
                )?,
            }
        }
        Ok(())
    })();
    match filled {
        Ok(()) => Ok(tmp.clone()),
        Err(e) => {
            let _ = state_dir::remove_tree(tmp);
            Err(e)
        }
    }
}

/// Removes what an interrupted [`write_pending`] leaves in a session's `pending/`: its
/// temporary files (names starting with `.`) and a `.meta` or `.pre/` whose `.patch` never
/// arrived. Only for a session nobody writes any more (a dead one, claimed by its caller): in
/// a live one these are a writer's work in progress.
pub fn tidy_dead_session(session_dir: &Path) -> Result<()> {
    tidy_dead_session_in(&StateDir::open(session_dir)?)
}

/// [`tidy_dead_session`] of a session directory already open.
pub fn tidy_dead_session_in(session: &StateDir) -> Result<()> {
    let dir = session.path().join(PENDING_DIR);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("list pending", &dir, e)),
    };
    let names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    for n in &names {
        let stem = n.strip_suffix(".meta").or_else(|| n.strip_suffix(".pre"));
        let orphan = stem.is_some_and(|s| !names.contains(&format!("{s}.patch")));
        if n.starts_with('.') || orphan {
            state_dir::remove_tree(&session.join(&dir.join(n))?)?;
        }
    }
    Ok(())
}

/// Lists every pending patch under `root`, oldest session first.
pub fn list(root: &Path) -> Result<Vec<PendingEntry>> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io("list sandbox root", root, e)),
    };
    let mut sessions: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| layout::is_session_id(n))
        .collect();
    sessions.sort();
    for s in sessions {
        out.extend(list_session(&root.join(&s), &s)?);
    }
    Ok(out)
}

/// Lists the pending patches of one session directory.
pub fn list_session(session_dir: &Path, session: &str) -> Result<Vec<PendingEntry>> {
    let dir = session_dir.join(PENDING_DIR);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list pending", &dir, e)),
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".patch").map(str::to_string))
        .filter(|n| DelegationId::parse(n).is_ok())
        .collect();
    names.sort();
    Ok(names
        .into_iter()
        .map(|d| {
            let meta = fs::read_to_string(dir.join(format!("{d}.meta")))
                .map(|t| PendingMeta::decode(&t))
                .unwrap_or_else(|_| PendingMeta {
                    session: session.to_string(),
                    delegation: d.clone(),
                    ..PendingMeta::default()
                });
            let pre = dir.join(format!("{d}.pre"));
            PendingEntry {
                id: format!("{session}/{d}"),
                patch_path: dir.join(format!("{d}.patch")),
                preimages: pre.is_dir().then_some(pre),
                meta,
            }
        })
        .collect())
}

/// The pending patch of `delegation` in this session whose bytes are exactly `patch`, if one
/// is stored. Storing the same work twice adds nothing: recovery and a manager's drop check
/// here first (a crash between storing a patch and removing its sandbox leaves both).
pub fn find_identical(
    session_dir: &Path,
    session: &str,
    delegation: &str,
    patch: &[u8],
) -> Result<Option<PathBuf>> {
    for e in list_session(session_dir, session)? {
        if e.meta.delegation == delegation && fs::read(&e.patch_path).is_ok_and(|p| p == patch) {
            return Ok(Some(e.patch_path));
        }
    }
    Ok(None)
}

/// Finds one pending patch by its full id `<session>/<delegation>`, or by a delegation id
/// that only one pending patch has.
pub fn find(root: &Path, id: &str) -> Result<PendingEntry> {
    let all = list(root)?;
    let matches: Vec<PendingEntry> = if id.contains('/') {
        all.into_iter().filter(|e| e.id == id).collect()
    } else {
        all.into_iter()
            .filter(|e| e.id.rsplit('/').next() == Some(id))
            .collect()
    };
    match matches.len() {
        0 => Err(Error::Pending {
            id: id.to_string(),
            reason: format!("no pending patch with this id under {}", root.display()),
        }),
        1 => matches.into_iter().next().ok_or_else(|| Error::Pending {
            id: id.to_string(),
            reason: "vanished".into(),
        }),
        n => Err(Error::Pending {
            id: id.to_string(),
            reason: format!("{n} pending patches match; use the full <session>/<delegation> id"),
        }),
    }
}

/// The bytes of the pending patch `id` (see [`find`] for the forms `id` may take).
pub fn read(root: &Path, id: &str) -> Result<Vec<u8>> {
    let e = find(root, id)?;
    fs::read(&e.patch_path).ctx("read pending patch", &e.patch_path)
}

/// Applies the pending patch `id` to its project (or to `project` when given), merging 3-way
/// against the pre-images stored with it unless `options` names others, with an undo record
/// in the root's [`UndoStore`] (`options.undo_dir` is ignored), so the apply can be undone
/// like any other. Once it is applied for real (not in check mode, outcome applied or already
/// applied) it is removed from the pending store. Conflicts and refusals are in the report
/// and keep the patch pending.
pub fn apply_pending(
    root: &Path,
    id: &str,
    project: Option<&Path>,
    options: &ApplyOptions,
) -> Result<ApplyReport> {
    let e = find(root, id)?;
    let patch = fs::read(&e.patch_path).ctx("read pending patch", &e.patch_path)?;
    let project = project.unwrap_or(&e.meta.project);
    let mut options = options.clone();
    if options.preimages.is_none() {
        options.preimages = e.preimages.clone();
    }
    let report = UndoStore::new(root).apply(project, &patch, &options)?;
    let applied = matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied);
    if applied && !options.check {
        drop_pending(root, &e.id)?;
    }
    Ok(report)
}

/// Removes a pending patch (and its meta and pre-images); the session directory goes too
/// when nothing else is left in it.
pub fn drop_pending(root: &Path, id: &str) -> Result<()> {
    let e = find(root, id)?;
    let session_dir = root
        .canonicalize()
        .ctx("resolve root", root)?
        .join(e.session());
    let d = e.delegation().to_string();
    let session = StateDir::open(&session_dir)?;
    let pdir = Path::new(PENDING_DIR);
    // The patch file is the entry: once it is gone, the rest is tidying up.
    state_dir::remove_file(&session.join(&pdir.join(format!("{d}.patch")))?)?;
    let tidy = || -> Result<()> {
        state_dir::remove_file(&session.join(&pdir.join(format!("{d}.meta")))?)?;
        state_dir::remove_tree(&session.join(&pdir.join(format!("{d}.pre")))?)?;
        let p = session.join(pdir)?;
        // A session without its lock file has ended; once its last pending patch is gone, so
        // is the session directory.
        if state_dir::remove_empty_dir(&p)?
            && !state_dir::exists(&session.join(Path::new(layout::LOCK_FILE))?)?
        {
            state_dir::remove_file(&session.join(Path::new(layout::META_FILE))?)?;
            state_dir::remove_empty_dir(&session.join(&session_dir)?)?;
        }
        Ok(())
    };
    match tidy() {
        // The session's own cleanup (its manager, a reaper or a prune) saw the last patch go
        // and removed the session first: nothing is left to tidy.
        Err(_) if !session_dir.exists() => Ok(()),
        r => r,
    }
}

impl PendingEntry {
    /// The session id part of the entry's id.
    pub fn session(&self) -> &str {
        self.id.split('/').next().unwrap_or_default()
    }

    /// The delegation id part of the entry's id.
    pub fn delegation(&self) -> &str {
        self.id.rsplit('/').next().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The meta file is line-based: a provenance whose command holds newlines and `=` still
    /// reads back whole, and an old meta without the new lines reads as before.
    #[test]
    fn meta_round_trips_provenance_and_split() {
        let m = PendingMeta {
            session: "S".into(),
            delegation: "d1".into(),
            project: PathBuf::from("/p"),
            created: 7,
            provenance: Provenance {
                command: vec!["sh".into(), "-c".into(), "a=1\necho $a".into()],
                cwd: Some("/w".into()),
                exit_status: Some(130),
                started_ms: Some(1),
                ended_ms: Some(2),
            },
            split_from: Some("S/d1".into()),
            ..PendingMeta::default()
        };
        let text = String::from_utf8(m.encode()).unwrap();
        assert_eq!(PendingMeta::decode(&text), m);
        let old = "session=S\ndelegation=d1\nproject_hex=2f70\ncreated=7\nrecovered=true\n";
        let o = PendingMeta::decode(old);
        assert!(o.recovered && o.provenance.is_empty() && o.split_from.is_none());
    }
}
