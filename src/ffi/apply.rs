//! The bridge behind `<patchbox/apply.hpp>`: [`crate::apply::apply_patch`] and
//! [`crate::apply::undo_apply`], applies recorded in the root's [`UndoStore`] (list, undo the
//! last, drop), and applying a pending patch, with options and reports as plain shared
//! structs.
//! Conflicts and refusals are in the report, not errors.

use std::os::unix::ffi::OsStringExt;

use super::{core, guarded, path_from};
use crate::apply::store::{RecordState, UndoStore};
use crate::apply::{ApplyOptions, ApplyReport, FileReport, FileStatus, Outcome};
use crate::fs::RelPath;

#[cxx::bridge(namespace = "patchbox::bridge")]
mod bridge {
    /// A path relative to the project, as raw bytes.
    struct FfiRelPath {
        bytes: Vec<u8>,
    }

    /// `apply::ApplyOptions` across the bridge; an absent path is `has_* == false`.
    struct FfiApplyOptions {
        check: bool,
        has_preimages: bool,
        preimages: Vec<u8>,
        conflict_markers: bool,
        has_undo_dir: bool,
        undo_dir: Vec<u8>,
        strip: usize,
        allow_outside_symlinks: bool,
    }

    /// `apply::FileStatus` across the bridge.
    #[derive(Debug)]
    #[repr(u8)]
    enum FfiFileStatus {
        Applied,
        Merged,
        AlreadyApplied,
        Conflict,
        Refused,
    }

    /// `apply::Outcome` across the bridge.
    #[derive(Debug)]
    #[repr(u8)]
    enum FfiOutcome {
        Applied,
        AppliedWithConflicts,
        AlreadyApplied,
        Refused,
    }

    /// `apply::HunkConflict` across the bridge.
    struct FfiHunkConflict {
        hunk: usize,
        header: String,
        reason: String,
    }

    /// `apply::FileReport` across the bridge.
    struct FfiFileReport {
        path: Vec<u8>,
        has_old_path: bool,
        old_path: Vec<u8>,
        status: FfiFileStatus,
        detail: String,
        conflicts: Vec<FfiHunkConflict>,
        markers_written: bool,
    }

    /// `apply::ApplyReport` across the bridge, with its `Display` rendering in `text`.
    struct FfiApplyReport {
        files: Vec<FfiFileReport>,
        outcome: FfiOutcome,
        check_only: bool,
        has_undo_dir: bool,
        undo_dir: Vec<u8>,
        warnings: Vec<String>,
        text: String,
        /// The report as the JSON record of `docs/json.md` (`records::ApplyRecord`).
        json: String,
    }

    /// `session::pending_select::PartialApply` across the bridge.
    struct FfiPartialApply {
        report: FfiApplyReport,
        has_remaining: bool,
        remaining: String,
    }

    /// `apply::UndoReport` across the bridge.
    struct FfiUndoReport {
        restored: Vec<FfiRelPath>,
        overwritten: Vec<FfiRelPath>,
        already_undone: bool,
        warnings: Vec<String>,
    }

    /// `apply::store::RecordState` across the bridge.
    #[derive(Debug)]
    #[repr(u8)]
    enum FfiRecordState {
        /// Its apply completed: it can be undone.
        Applied,
        /// It has been used.
        Undone,
        /// Its apply has not completed.
        Incomplete,
    }

    /// `apply::store::UndoEntry` across the bridge (`created`: seconds since the epoch).
    struct FfiApplyRecord {
        id: String,
        dir: Vec<u8>,
        project: Vec<u8>,
        created: u64,
        paths: usize,
        state: FfiRecordState,
    }

    extern "Rust" {
        fn apply_patch(
            project_dir: &[u8],
            patch: &[u8],
            options: &FfiApplyOptions,
        ) -> Result<FfiApplyReport>;
        fn undo_apply(project_dir: &[u8], undo_dir: &[u8], force: bool) -> Result<FfiUndoReport>;
        fn apply_pending(
            root: &[u8],
            id: &str,
            project: &[u8],
            options: &FfiApplyOptions,
        ) -> Result<FfiApplyReport>;
        fn apply_stored(
            store: &str,
            id: &str,
            project: &[u8],
            root: &[u8],
            options: &FfiApplyOptions,
        ) -> Result<FfiApplyReport>;
        fn apply_pending_selected(
            root: &[u8],
            id: &str,
            project: &[u8],
            options: &FfiApplyOptions,
            only: Vec<String>,
            exclude: Vec<String>,
            hunks: Vec<String>,
        ) -> Result<FfiPartialApply>;
        fn apply_recorded(
            root: &[u8],
            project_dir: &[u8],
            patch: &[u8],
            options: &FfiApplyOptions,
        ) -> Result<FfiApplyReport>;
        fn list_applies(root: &[u8], project_dir: &[u8]) -> Result<Vec<FfiApplyRecord>>;
        fn undo_last_apply(root: &[u8], project_dir: &[u8], force: bool) -> Result<FfiUndoReport>;
        fn drop_apply_record(root: &[u8], id: &str) -> Result<()>;
    }
}

fn apply_options_in(o: &bridge::FfiApplyOptions) -> ApplyOptions {
    ApplyOptions {
        check: o.check,
        preimages: o.has_preimages.then(|| path_from(&o.preimages)),
        conflict_markers: o.conflict_markers,
        undo_dir: o.has_undo_dir.then(|| path_from(&o.undo_dir)),
        strip: o.strip,
        allow_outside_symlinks: o.allow_outside_symlinks,
        ..ApplyOptions::default()
    }
}

fn status_out(s: FileStatus) -> bridge::FfiFileStatus {
    match s {
        FileStatus::Applied => bridge::FfiFileStatus::Applied,
        FileStatus::Merged => bridge::FfiFileStatus::Merged,
        FileStatus::AlreadyApplied => bridge::FfiFileStatus::AlreadyApplied,
        FileStatus::Conflict => bridge::FfiFileStatus::Conflict,
        FileStatus::Refused => bridge::FfiFileStatus::Refused,
    }
}

fn outcome_out(o: Outcome) -> bridge::FfiOutcome {
    match o {
        Outcome::Applied => bridge::FfiOutcome::Applied,
        Outcome::AppliedWithConflicts => bridge::FfiOutcome::AppliedWithConflicts,
        Outcome::AlreadyApplied => bridge::FfiOutcome::AlreadyApplied,
        Outcome::Refused => bridge::FfiOutcome::Refused,
    }
}

fn rel_paths_out(v: Vec<RelPath>) -> Vec<bridge::FfiRelPath> {
    v.iter()
        .map(|p| bridge::FfiRelPath {
            bytes: p.as_bytes().to_vec(),
        })
        .collect()
}

fn file_report_out(f: FileReport) -> bridge::FfiFileReport {
    bridge::FfiFileReport {
        path: f.path.as_bytes().to_vec(),
        has_old_path: f.old_path.is_some(),
        old_path: f
            .old_path
            .map(|p| p.as_bytes().to_vec())
            .unwrap_or_default(),
        status: status_out(f.status),
        detail: f.detail,
        conflicts: f
            .conflicts
            .into_iter()
            .map(|c| bridge::FfiHunkConflict {
                hunk: c.hunk,
                header: c.header,
                reason: c.reason,
            })
            .collect(),
        markers_written: f.markers_written,
    }
}

fn apply_report_out(r: ApplyReport) -> bridge::FfiApplyReport {
    let text = r.to_string();
    let json = crate::records::to_json(&crate::records::ApplyRecord::from(&r));
    bridge::FfiApplyReport {
        files: r.files.into_iter().map(file_report_out).collect(),
        outcome: outcome_out(r.outcome),
        check_only: r.check_only,
        has_undo_dir: r.undo_dir.is_some(),
        undo_dir: r
            .undo_dir
            .map(|p| p.into_os_string().into_vec())
            .unwrap_or_default(),
        warnings: r.warnings,
        text,
        json,
    }
}

/// [`crate::apply::apply_patch`]: conflicts and refusals are in the report, not errors.
fn apply_patch(
    project_dir: &[u8],
    patch: &[u8],
    options: &bridge::FfiApplyOptions,
) -> Result<bridge::FfiApplyReport, String> {
    guarded(|| {
        let r = core(crate::apply::apply_patch(
            path_from(project_dir),
            patch,
            &apply_options_in(options),
        ))?;
        Ok(apply_report_out(r))
    })
}

/// [`crate::apply::undo_apply`].
fn undo_apply(
    project_dir: &[u8],
    undo_dir: &[u8],
    force: bool,
) -> Result<bridge::FfiUndoReport, String> {
    guarded(|| {
        let r = core(crate::apply::undo_apply(
            path_from(project_dir),
            path_from(undo_dir),
            force,
        ))?;
        Ok(undo_report_out(r))
    })
}

/// [`crate::session::pending::apply_pending`]; an empty `project` is the patch's own, and
/// `options.has_preimages == false` uses the pre-images stored with the patch.
fn apply_pending(
    root: &[u8],
    id: &str,
    project: &[u8],
    options: &bridge::FfiApplyOptions,
) -> Result<bridge::FfiApplyReport, String> {
    guarded(|| {
        let root = core(super::store::root_from(root))?;
        let project = (!project.is_empty()).then(|| path_from(project));
        let r = core(crate::session::pending::apply_pending(
            &root,
            id,
            project.as_deref(),
            &apply_options_in(options),
        ))?;
        Ok(apply_report_out(r))
    })
}

/// [`crate::session::remote::RemotePending::apply`] of the pending patch `id` in the object
/// store `store` onto `project`, with its undo record under `root` (empty: the default).
fn apply_stored(
    store: &str,
    id: &str,
    project: &[u8],
    root: &[u8],
    options: &bridge::FfiApplyOptions,
) -> Result<bridge::FfiApplyReport, String> {
    guarded(|| {
        let root = core(super::store::root_from(root))?;
        let s = core(super::store::remote_of(store))?;
        std::fs::create_dir_all(&root)
            .map_err(|e| super::encode(&crate::Error::io("create root", &root, e)))?;
        let r = core(s.apply(id, &path_from(project), &root, &apply_options_in(options)))?;
        Ok(apply_report_out(r))
    })
}

/// [`crate::session::pending_select::apply_pending_selected`]: the selection's pathspecs
/// and `PATH:N,…` hunk lists as the CLI takes them; the report's JSON also names the pending
/// patch and its `remaining` rest.
fn apply_pending_selected(
    root: &[u8],
    id: &str,
    project: &[u8],
    options: &bridge::FfiApplyOptions,
    only: Vec<String>,
    exclude: Vec<String>,
    hunks: Vec<String>,
) -> Result<bridge::FfiPartialApply, String> {
    use crate::patch::select::{HunkPick, Selection};
    guarded(|| {
        let root = core(super::store::root_from(root))?;
        let project = (!project.is_empty()).then(|| path_from(project));
        let hunks = hunks
            .iter()
            .map(|h| HunkPick::parse(h))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                super::encode(&crate::Error::Pending {
                    id: id.to_string(),
                    reason: e.to_string(),
                })
            })?;
        let sel = Selection {
            only,
            exclude,
            hunks,
        };
        let full_id = core(crate::session::pending::find(&root, id))?.id;
        let r = core(crate::session::pending_select::apply_pending_selected(
            &root,
            id,
            project.as_deref(),
            &sel,
            &apply_options_in(options),
        ))?;
        let mut record = crate::records::ApplyRecord::from(&r.report);
        record.pending_id = Some(full_id);
        if !sel.is_everything() {
            record.remaining = Some(r.remaining.clone());
        }
        let mut report = apply_report_out(r.report);
        report.json = crate::records::to_json(&record);
        Ok(bridge::FfiPartialApply {
            report,
            has_remaining: r.remaining.is_some(),
            remaining: r.remaining.unwrap_or_default(),
        })
    })
}

fn undo_report_out(r: crate::apply::UndoReport) -> bridge::FfiUndoReport {
    let mut warnings = r.warnings;
    warnings.extend(r.recovery.warnings.iter().cloned());
    bridge::FfiUndoReport {
        restored: rel_paths_out(r.restored),
        overwritten: rel_paths_out(r.overwritten),
        already_undone: r.already_undone,
        warnings,
    }
}

/// The root's undo store (an empty `root`: the default root).
fn store_of(root: &[u8]) -> Result<UndoStore, String> {
    Ok(UndoStore::new(core(super::store::root_from(root))?))
}

/// [`UndoStore::apply`]: apply with an undo record in the root's store.
fn apply_recorded(
    root: &[u8],
    project_dir: &[u8],
    patch: &[u8],
    options: &bridge::FfiApplyOptions,
) -> Result<bridge::FfiApplyReport, String> {
    guarded(|| {
        let r =
            core(store_of(root)?.apply(path_from(project_dir), patch, &apply_options_in(options)))?;
        Ok(apply_report_out(r))
    })
}

/// [`UndoStore::list`]; an empty `project_dir` lists every project's records.
fn list_applies(root: &[u8], project_dir: &[u8]) -> Result<Vec<bridge::FfiApplyRecord>, String> {
    guarded(|| {
        let project = (!project_dir.is_empty()).then(|| path_from(project_dir));
        let list = core(store_of(root)?.list(project.as_deref()))?;
        Ok(list
            .into_iter()
            .map(|e| bridge::FfiApplyRecord {
                created: e
                    .created
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
                id: e.id,
                dir: e.dir.into_os_string().into_vec(),
                project: e.project.into_os_string().into_vec(),
                paths: e.paths,
                state: match e.state {
                    RecordState::Applied => bridge::FfiRecordState::Applied,
                    RecordState::Undone => bridge::FfiRecordState::Undone,
                    RecordState::Incomplete => bridge::FfiRecordState::Incomplete,
                },
            })
            .collect())
    })
}

/// [`UndoStore::undo_last`].
fn undo_last_apply(
    root: &[u8],
    project_dir: &[u8],
    force: bool,
) -> Result<bridge::FfiUndoReport, String> {
    guarded(|| {
        let r = core(store_of(root)?.undo_last(path_from(project_dir), force))?;
        Ok(undo_report_out(r.report))
    })
}

/// [`UndoStore::drop_record`].
fn drop_apply_record(root: &[u8], id: &str) -> Result<(), String> {
    guarded(|| core(store_of(root)?.drop_record(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::path_bytes;

    fn opts() -> bridge::FfiApplyOptions {
        bridge::FfiApplyOptions {
            check: false,
            has_preimages: false,
            preimages: Vec::new(),
            conflict_markers: false,
            has_undo_dir: false,
            undo_dir: Vec::new(),
            strip: 1,
            allow_outside_symlinks: false,
        }
    }

    #[test]
    fn apply_errors_carry_their_kind() {
        let project = tempfile::tempdir().unwrap();
        let dir = path_bytes(project.path());
        let s = apply_patch(&dir, b"not a patch\n", &opts()).err().unwrap();
        assert!(s.starts_with("patch_parse\x1f"), "{s}");
        let evil = b"--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n";
        let s = apply_patch(&dir, evil, &opts()).err().unwrap();
        assert!(s.starts_with("containment\x1f"), "{s}");
        let s = undo_apply(&dir, &dir, false).err().unwrap();
        assert!(s.starts_with("io\x1f"), "{s}");
    }

    #[test]
    fn apply_reports_cross_whole() {
        let project = tempfile::tempdir().unwrap();
        let records = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
        let dir = path_bytes(project.path());
        let undo = records.path().join("u");
        let patch = b"diff --git a/a.txt b/b.txt\nsimilarity index 50%\nrename from a.txt\n\
rename to b.txt\n--- a/a.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-one\n+two\n";

        let mut o = opts();
        o.check = true;
        let r = apply_patch(&dir, patch, &o).unwrap();
        assert!(r.check_only && !r.has_undo_dir);
        assert_eq!(r.outcome, bridge::FfiOutcome::Applied);
        assert!(r.text.contains("would be applied"), "{}", r.text);

        let mut o = opts();
        o.has_undo_dir = true;
        o.undo_dir = path_bytes(&undo);
        let r = apply_patch(&dir, patch, &o).unwrap();
        assert_eq!(r.outcome, bridge::FfiOutcome::Applied, "{}", r.text);
        assert!(r.has_undo_dir && r.undo_dir == path_bytes(&undo));
        let f = &r.files[0];
        assert_eq!(
            (f.path.as_slice(), f.old_path.as_slice()),
            (&b"b.txt"[..], &b"a.txt"[..])
        );
        assert!(f.has_old_path);
        assert_eq!(f.status, bridge::FfiFileStatus::Applied);
        let again = apply_patch(&dir, patch, &opts()).unwrap();
        assert_eq!(again.outcome, bridge::FfiOutcome::AlreadyApplied);

        let u = undo_apply(&dir, &path_bytes(&undo), false).unwrap();
        assert_eq!(u.restored.len(), 2);
        assert!(!u.already_undone);
        assert_eq!(
            std::fs::read(project.path().join("a.txt")).unwrap(),
            b"one\n"
        );
    }
}
