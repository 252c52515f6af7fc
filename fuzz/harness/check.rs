//! Running a case, the oracle: patchbox (check mode, then for real) and `git apply` on copies,
//! the invariants (no panic, no write outside, nothing changed after a refusal, check mode
//! writes nothing and predicts the outcome), and the class of each disagreement.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use patchbox::apply::{apply_patch, ApplyOptions, ApplyReport, FileStatus, Outcome};

use super::case::Case;
use super::fingerprint::{exact, view, view_diff, Exact};
use super::git::{git_apply, git_apply_args, git_error_class};
use super::patches::DiffRepo;
use super::tree::{subst_outside, write_tree, Tree};

/// What one case showed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Both applied with identical results, or both refused.
    Agree,
    /// Both wrote nothing: patchbox found nothing to do, git refused (a re-applied patch).
    AgreeNoop,
    /// git applied, patchbox wrote nothing (refused, conflict, error). Allowed: stricter.
    Stricter(String),
    /// git refused, patchbox wrote: justified in DIFFERENCES.md, or a bug.
    GitRefusedPatchboxWrote(String),
    /// Both applied, results differ: justified in DIFFERENCES.md, or a bug.
    BothAppliedDiffer(String),
    /// Invariant violations: always bugs.
    Panic(String),
    OutsideWrite(String),
    ChangedAfterRefusal(String),
    CheckWrote(String),
    CheckMismatch(String),
}

impl Class {
    /// The key used in DIFFERENCES.md and in the figures.
    pub fn key(&self) -> String {
        match self {
            Class::Agree => "agree".into(),
            Class::AgreeNoop => "agree: patchbox no-op, git refused".into(),
            Class::Stricter(k) => format!("stricter: {k}"),
            Class::GitRefusedPatchboxWrote(k) => format!("git-refused/patchbox-wrote: {k}"),
            Class::BothAppliedDiffer(k) => format!("both-applied/differ: {k}"),
            Class::Panic(k) => format!("PANIC: {k}"),
            Class::OutsideWrite(k) => format!("OUTSIDE-WRITE: {k}"),
            Class::ChangedAfterRefusal(k) => format!("CHANGED-AFTER-REFUSAL: {k}"),
            Class::CheckWrote(k) => format!("CHECK-WROTE: {k}"),
            Class::CheckMismatch(k) => format!("check-mismatch: {k}"),
        }
    }
    /// Needs an entry in DIFFERENCES.md (justified or known bug) to be accepted.
    pub fn needs_listing(&self) -> bool {
        !matches!(self, Class::Agree | Class::AgreeNoop | Class::Stricter(_))
    }
    pub fn is_invariant_violation(&self) -> bool {
        matches!(
            self,
            Class::Panic(_)
                | Class::OutsideWrite(_)
                | Class::ChangedAfterRefusal(_)
                | Class::CheckWrote(_)
        )
    }
}

/// A worker's scratch space: the diff repository and the case directories.
pub struct Worker {
    pub scratch: tempfile::TempDir,
    pub repo: DiffRepo,
    count: u64,
}

impl Default for Worker {
    fn default() -> Self {
        Self::new()
    }
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".into()
    }
}

fn make_parent(dir: &Path, project: &Tree) -> PathBuf {
    fs::create_dir_all(dir.join("outside/sub")).unwrap();
    fs::write(dir.join("outside/secret.txt"), b"secret\n").unwrap();
    fs::write(dir.join("outside/sub/x"), b"x\n").unwrap();
    fs::write(dir.join("sibling.txt"), b"sibling\n").unwrap();
    let proj = dir.join("proj");
    fs::create_dir(&proj).unwrap();
    write_tree(&proj, project, &dir.join("outside"));
    proj
}

/// Normalizes a detail/error text into a class key: digits out, quoted names out, first
/// clause only.
fn normalize(s: &str) -> String {
    let s = s.lines().next().unwrap_or("");
    let mut out = String::new();
    let mut q = None;
    for ch in s.chars() {
        match (q, ch) {
            (None, '\'' | '`' | '"') => {
                q = Some(ch);
                out.push_str("'P'");
            }
            (Some(c), _) if c == ch => q = None,
            (Some(_), _) => {}
            (None, '0'..='9') => {
                if !out.ends_with('N') {
                    out.push('N')
                }
            }
            (None, _) => out.push(ch),
        }
    }
    let out = out
        .split(['(', ';'])
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    out.chars().take(90).collect()
}

fn report_key(r: &ApplyReport) -> String {
    match r
        .files
        .iter()
        .find(|f| matches!(f.status, FileStatus::Refused | FileStatus::Conflict))
    {
        Some(f) => format!("{}: {}", f.status, normalize(&f.detail)),
        None => format!("{:?}", r.outcome),
    }
}

fn error_key(e: &patchbox::Error) -> String {
    let dbg = format!("{e:?}");
    let variant: String = dbg.chars().take_while(|c| c.is_alphanumeric()).collect();
    format!("Err {variant}: {}", normalize(&e.to_string()))
}

impl Worker {
    pub fn new() -> Worker {
        let scratch = tempfile::Builder::new()
            .prefix("patchbox-fuzz-")
            .tempdir()
            .unwrap();
        let repo = DiffRepo::new(scratch.path());
        Worker {
            scratch,
            repo,
            count: 0,
        }
    }

    /// Runs `case`; returns its class and a one-line explanation.
    pub fn run(&mut self, case: &Case) -> (Class, String) {
        self.count += 1;
        let root = self.scratch.path().join(format!("case-{}", self.count));
        let ours_parent = root.join("P");
        let theirs_parent = root.join("Q");
        let proj = make_parent(&ours_parent, &case.project);
        let theirs = make_parent(&theirs_parent, &case.project);
        let outside_p = ours_parent.join("outside");
        let mut opts = ApplyOptions {
            conflict_markers: case.conflict_markers,
            ..ApplyOptions::default()
        };
        if let Some(pre) = &case.preimages {
            let d = ours_parent.join("pre");
            fs::create_dir(&d).unwrap();
            write_tree(&d, pre, &outside_p);
            opts.preimages = Some(d);
        }
        let patch_ours = subst_outside(&case.patch, &outside_p);
        let patch_theirs = subst_outside(&case.patch, &theirs_parent.join("outside"));
        let mut result = self.run_in(
            &ours_parent,
            &proj,
            &patch_ours,
            &opts,
            &theirs,
            &patch_theirs,
        );
        if let Class::BothAppliedDiffer(what) = &mut result.0 {
            // A cut "\ No newline" marker: patchbox honours any "\ " line, git keeps the newline.
            let short_marker = case
                .patch
                .split(|&b| b == b'\n')
                .any(|l| l.starts_with(b"\\") && l.len() < b"\\ No newline at end of file".len());
            if short_marker && what.as_str() == "content differs" {
                what.push_str(" (short no-newline marker)");
            }
            // Zero-context hunks: git without --unidiff-zero anchors them at the file's end.
            let again_parent = root.join("R");
            let again = make_parent(&again_parent, &case.project);
            let patch_again = subst_outside(&case.patch, &again_parent.join("outside"));
            let home = self.scratch.path().join("home");
            let (ok, _) = git_apply_args(&again, &home, &patch_again, &["--unidiff-zero"]);
            if ok && view(&again, &again_parent.join("outside")) == view(&proj, &outside_p) {
                what.push_str(" (same result with --unidiff-zero)");
            }
        }
        let _ = make_writable(&root);
        let _ = fs::remove_dir_all(&root);
        result
    }

    fn run_in(
        &mut self,
        parent: &Path,
        proj: &Path,
        patch: &[u8],
        opts: &ApplyOptions,
        theirs: &Path,
        patch_theirs: &[u8],
    ) -> (Class, String) {
        let outside_before = exact(parent, Some(proj));
        let proj_before = exact(proj, None);
        let outside_changed = |when: &str| -> Option<(Class, String)> {
            let now = exact(parent, Some(proj));
            (now != outside_before).then(|| {
                let (what, path) = exact_diff(&outside_before, &now);
                (
                    Class::OutsideWrite(format!("{when}: {what}")),
                    format!("outside the project: {path}"),
                )
            })
        };

        // Check mode: writes nothing, predicts the outcome.
        let check_opts = ApplyOptions {
            check: true,
            ..opts.clone()
        };
        let checked = catch_unwind(AssertUnwindSafe(|| apply_patch(proj, patch, &check_opts)));
        let checked = match checked {
            Err(e) => {
                let t = panic_text(&e);
                return (Class::Panic(format!("check: {}", normalize(&t))), t);
            }
            Ok(r) => r,
        };
        if let Some(v) = outside_changed("check") {
            return v;
        }
        if exact(proj, None) != proj_before {
            let (what, path) = exact_diff(&proj_before, &exact(proj, None));
            return (Class::CheckWrote(what), path);
        }

        // For real.
        let applied = catch_unwind(AssertUnwindSafe(|| apply_patch(proj, patch, opts)));
        let applied = match applied {
            Err(e) => {
                let t = panic_text(&e);
                return (Class::Panic(format!("apply: {}", normalize(&t))), t);
            }
            Ok(r) => r,
        };
        if let Some(v) = outside_changed("apply") {
            return v;
        }
        let proj_after = exact(proj, None);
        let wrote = matches!(&applied, Ok(r) if r.wrote());
        if !wrote && proj_after != proj_before {
            let (what, path) = exact_diff(&proj_before, &proj_after);
            let how = match &applied {
                Ok(r) => format!("{:?}", r.outcome),
                Err(e) => error_key(e),
            };
            return (Class::ChangedAfterRefusal(format!("{how}: {what}")), path);
        }
        let out_of = |r: &patchbox::Result<ApplyReport>| match r {
            Ok(r) => format!("{:?}", r.outcome),
            Err(e) => error_key(e),
        };
        let (co, ao) = (out_of(&checked), out_of(&applied));
        let check_mismatch = (co != ao).then(|| {
            (
                Class::CheckMismatch(format!("check {co}, apply {ao}")),
                String::new(),
            )
        });

        // git apply on the other copy.
        let home = self.scratch.path().join("home");
        let (git_applied, stderr) = git_apply(theirs, &home, patch_theirs);

        let pb_key = match &applied {
            Ok(r) => report_key(r),
            Err(e) => error_key(e),
        };
        let class = match (wrote, git_applied) {
            (true, true) => {
                let ours = view(proj, &parent.join("outside"));
                let theirs_view = view(theirs, &theirs.parent().unwrap().join("outside"));
                let (what, path) = view_diff(&ours, &theirs_view);
                if what == "equal" {
                    (Class::Agree, String::new())
                } else {
                    // git wrote a file `dev/null` (a `/dev/null` name it took for a file's):
                    // the first difference may be elsewhere (the directory it left behind).
                    let git_wrote_dev_null = !ours.contains_key(b"dev/null".as_slice())
                        && theirs_view.contains_key(b"dev/null".as_slice());
                    let what = if path == "dev" || path.starts_with("dev/") || git_wrote_dev_null {
                        format!("{what} (git wrote dev/null)")
                    } else if stderr.contains("error: ") {
                        format!(
                            "{what} (git exit 0 with error: {})",
                            git_error_class(&stderr)
                        )
                    } else {
                        what
                    };
                    (Class::BothAppliedDiffer(what), path)
                }
            }
            (false, false) => match &applied {
                Ok(r) if r.outcome == Outcome::AlreadyApplied => (Class::AgreeNoop, String::new()),
                _ => (Class::Agree, String::new()),
            },
            (false, true) => (Class::Stricter(pb_key), String::new()),
            (true, false) => {
                let r = applied.as_ref().unwrap();
                let mut k = format!("git: {}", git_error_class(&stderr));
                // git's hunks failed only on files patchbox found already patched (the
                // project drifted to the patch's result): patchbox's idempotence.
                let failed: Vec<&str> = stderr
                    .lines()
                    .filter_map(|l| l.strip_prefix("error: patch failed: "))
                    .filter_map(|l| l.rsplit_once(':').map(|x| x.0))
                    .collect();
                let already = !failed.is_empty()
                    && failed.iter().all(|p| {
                        r.files.iter().any(|f| {
                            // A rename or copy whose contents are already the result is
                            // "Applied" (the file still moves), its detail says so.
                            let named = f.path.to_string() == *p
                                || f.old_path.as_ref().is_some_and(|o| o.to_string() == *p);
                            // (Its blob id is the `index` line's new id, or the hunks' new
                            // side is there: the planner's `How::Already` details.)
                            named
                                && (f.status == FileStatus::AlreadyApplied
                                    || f.detail.contains("already present")
                                    || f.detail.contains("already match")
                                    || f.detail.contains("already equals"))
                        })
                    });
                if k == "git: patch failed" && already {
                    k.push_str(" + already applied");
                } else if k == "git: patch failed" {
                    // Zero-context hunks: git wants --unidiff-zero for them.
                    let (ok, _) = git_apply_args(theirs, &home, patch_theirs, &["--unidiff-zero"]);
                    let same = ok && {
                        let o = view(proj, &parent.join("outside"));
                        o == view(theirs, &theirs.parent().unwrap().join("outside"))
                    };
                    if same {
                        k.push_str(" (same result with --unidiff-zero)");
                    }
                }
                if r.outcome == Outcome::AppliedWithConflicts {
                    k.push_str(" + conflict markers");
                } else if r.files.iter().any(|f| f.status == FileStatus::Merged) {
                    k.push_str(" + merged");
                }
                (Class::GitRefusedPatchboxWrote(k), stderr.trim().to_string())
            }
        };
        match check_mismatch {
            Some(m)
                if class.0 == Class::Agree
                    || matches!(class.0, Class::Stricter(_) | Class::AgreeNoop) =>
            {
                m
            }
            _ => class,
        }
    }
}

fn make_writable(root: &Path) -> std::io::Result<()> {
    for e in walkdir::WalkDir::new(root).into_iter().flatten() {
        let m = fs::symlink_metadata(e.path())?;
        if m.is_dir() {
            let _ = fs::set_permissions(e.path(), fs::Permissions::from_mode(0o755));
        }
    }
    Ok(())
}

fn exact_diff(a: &Exact, b: &Exact) -> (String, String) {
    let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let what = match (a.get(k), b.get(k)) {
            (Some(_), None) => "removed",
            (None, Some(_)) => "created",
            (Some(x), Some(y)) if x.0 != y.0 => "mode changed",
            (Some(x), Some(y)) if x.1 != y.1 => "content changed",
            (Some(x), Some(y)) if x != y => "mtime changed",
            _ => continue,
        };
        return (what.to_string(), String::from_utf8_lossy(k).into_owned());
    }
    ("equal".into(), String::new())
}
