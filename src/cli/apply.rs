//! `patchbox apply`'s reports: the apply, `--undo` and `--list-undo`, as text or, with
//! `--json`, as the records of `docs/json.md`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use patchbox::apply::store::{RecordState, UndoStore};
use patchbox::apply::{ApplyOptions, ApplyReport, Outcome};
use patchbox::records::{self, ApplyRecord, UndoEntryRecord, UndoRecord};
use patchbox::Error;

use crate::{exit, utc};

/// Applies `text` to `project` with an undo record in `store`, and prints the report: on
/// stdout when the patch applied, on stderr otherwise (with `json`, the record on stdout
/// either way). Exit 1 when refused or conflicting.
pub fn apply_and_report(
    project: &Path,
    store: &UndoStore,
    text: &[u8],
    opts: &ApplyOptions,
    json: bool,
) -> Result<ExitCode, Error> {
    let report = store.apply(project, text, opts)?;
    if json {
        print!("{}", records::to_json(&ApplyRecord::from(&report)));
        return Ok(status(&report));
    }
    Ok(print_report(&report))
}

/// Exit 0 when the patch applied (or was applied already), else [`exit::REFUSED`].
fn status(report: &ApplyReport) -> ExitCode {
    if matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::REFUSED)
    }
}

/// Prints an apply's report (stdout when it applied, stderr otherwise); exit
/// [`exit::REFUSED`] when refused or conflicting.
fn print_report(report: &ApplyReport) -> ExitCode {
    if matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied) {
        println!("{report}");
    } else {
        eprintln!("{report}");
    }
    status(report)
}

/// Restores the project from its newest undo record, then removes the record.
pub fn undo_last(
    project: &Path,
    store: &UndoStore,
    force: bool,
    json: bool,
) -> Result<ExitCode, Error> {
    let r = match store.undo_last(project, force) {
        Ok(r) => r,
        // Nothing to undo: refused, not failed.
        Err(e @ Error::Pending { .. }) => {
            eprintln!("patchbox: {e}");
            return Ok(ExitCode::from(exit::REFUSED));
        }
        Err(e) => return Err(e),
    };
    if json {
        print!("{}", records::to_json(&UndoRecord::from(&r)));
        return Ok(ExitCode::SUCCESS);
    }
    if !r.report.recovery.is_empty() {
        eprintln!("{}", r.report.recovery);
    }
    if r.report.already_undone {
        println!(
            "the interrupted undo of {} is complete; nothing more to undo",
            r.record.id
        );
    }
    for p in &r.report.restored {
        println!("restored {p}");
    }
    for w in &r.report.warnings {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One undo record of the project a line: id, time (UTC), paths changed, state.
pub fn list_undo_records(project: &Path, store: &UndoStore, json: bool) -> Result<ExitCode, Error> {
    let list = store.list(Some(project))?;
    if json {
        let recs: Vec<UndoEntryRecord> = list.iter().map(Into::into).collect();
        print!("{}", records::to_json(&recs));
        return Ok(ExitCode::SUCCESS);
    }
    let mut stdout = std::io::stdout().lock();
    for r in list {
        let secs = r
            .created
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let _ = writeln!(
            stdout,
            "{}\t{}\t{} path(s)\t{}",
            r.id,
            utc(secs),
            r.paths,
            match r.state {
                RecordState::Applied => "applied",
                RecordState::Undone => "undone",
                RecordState::Incomplete => "incomplete",
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
