//! Reviewing and accepting a delegation's work from the command line as a plugin would: it
//! reads the JSON, shows the summary, applies a selection of files or hunks, applies the rest
//! later, undoes. `git apply` (with `--include`/`--exclude`) and `git diff --stat` are the
//! oracles where one exists.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_patchbox"));
    // A user's pager or colour settings never reach the tests.
    c.env_remove("PAGER")
        .env_remove("PATCHBOX_PAGER")
        .env_remove("NO_COLOR");
    c
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "status {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(out: Output) -> Value {
    let out = ok(out);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// A project of 30 numbered lines in `a.txt`, `b.txt` and `src/c.txt`.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let lines: String = (1..=30).map(|i| format!("{i}\n")).collect();
    write(&project, "a.txt", lines.as_bytes());
    write(&project, "b.txt", b"hi\n");
    write(&project, "src/c.txt", b"see\n");
    let root = tmp.path().join("root");
    (tmp, project, root)
}

/// The delegation's work: two hunks in `a.txt` (lines 2 and 28), one line more in `b.txt`,
/// `src/c.txt` deleted, `new.txt` created.
const WORK: &str = "sed -i 's/^2$/two/; s/^28$/twenty-eight/' a.txt; echo there >> b.txt; \
                    rm src/c.txt; echo new > new.txt";

/// Runs [`WORK`] with `--pending --json` and returns the run's record.
fn run_pending(project: &Path, root: &Path) -> Value {
    json(
        bin()
            .arg("run")
            .arg("--project")
            .arg(project)
            .arg("--root")
            .arg(root)
            .args([
                "--id",
                "task",
                "--pending",
                "--json",
                "--",
                "sh",
                "-c",
                WORK,
            ])
            .output()
            .unwrap(),
    )
}

fn pending(root: &Path, args: &[&str]) -> Output {
    bin()
        .arg("pending")
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

#[test]
fn run_and_pending_speak_json_with_provenance() {
    let (_tmp, project, root) = setup();
    let run = run_pending(&project, &root);
    assert_eq!(run["delivered"], "pending");
    assert_eq!(run["delegation"], "task");
    let id = run["pending_id"].as_str().unwrap().to_string();
    assert_eq!(run["provenance"]["exit_status"], 0);
    assert_eq!(run["provenance"]["command"][0], "sh");
    assert_eq!(run["provenance"]["command"][2], WORK);

    let list = json(pending(&root, &["list", "--json"]));
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    let rec = &list[0];
    assert_eq!(rec["id"], id.as_str());
    assert_eq!(rec["origin"], "delegation");
    assert_eq!(
        rec["project"],
        project.canonicalize().unwrap().to_str().unwrap()
    );
    let p = &rec["provenance"];
    assert!(p["started_ms"].as_u64().unwrap() <= p["ended_ms"].as_u64().unwrap());
    assert!(rec["created_ms"].as_u64().unwrap() > 0);
    let files: Vec<(String, String, u64, u64, u64)> = rec["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["change"].as_str().unwrap().to_string(),
                f["insertions"].as_u64().unwrap(),
                f["deletions"].as_u64().unwrap(),
                f["hunks"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("a.txt".into(), "modified".into(), 2, 2, 2),
            ("b.txt".into(), "modified".into(), 1, 0, 1),
            ("new.txt".into(), "added".into(), 1, 0, 1),
            ("src/c.txt".into(), "deleted".into(), 0, 1, 1),
        ]
    );
    assert_eq!(rec["files"][0]["old_mode"], "100644");

    // show: the same record with the patch text, which git applies as it is.
    let show = json(pending(&root, &["show", "--json", &id]));
    assert_eq!(show["files"], rec["files"]);
    let patch = show["patch"].as_str().unwrap();
    assert_eq!(
        patch.as_bytes(),
        fs::read(rec["patch_file"].as_str().unwrap()).unwrap()
    );
    let scratch = tempfile::tempdir().unwrap();
    let by_git = git_apply_copy(&project, patch.as_bytes(), scratch.path());
    assert_eq!(read(&by_git.join("b.txt")), "hi\nthere\n");

    // The text view names what ran.
    let text = String::from_utf8(ok(pending(&root, &["show", &id])).stdout).unwrap();
    assert!(text.starts_with(&format!("pending {id}\n")), "{text}");
    assert!(text.contains("Command:    sh -c '"), "{text}");
    assert!(text.contains("Exit:       0\n"), "{text}");
    assert!(text.contains("diff --git a/a.txt b/a.txt\n"), "{text}");

    let sessions = json(
        bin()
            .args(["sessions", "--json", "--root"])
            .arg(&root)
            .output()
            .unwrap(),
    );
    let s = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| id.starts_with(s["id"].as_str().unwrap()))
        .expect("the session is listed");
    assert_eq!(s["pending"], 1);
    let pruned = json(
        bin()
            .args(["sessions", "prune", "--json", "--root"])
            .arg(&root)
            .output()
            .unwrap(),
    );
    assert!(pruned["errors"].as_array().unwrap().is_empty(), "{pruned}");
    assert!(pruned["pruned"].is_array() && pruned["recovered"].is_array());
    assert_eq!(
        json(pending(&root, &["list", "--json"]))[0]["id"],
        id.as_str()
    );
}

#[test]
fn stat_matches_git_diff_stat() {
    let (tmp, project, root) = setup();
    let id = run_pending(&project, &root)["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = String::from_utf8(ok(pending(&root, &["show", "--stat", &id])).stdout).unwrap();
    let ours = &out[out.find("\n\n").unwrap() + 2..];
    // git's own: the same change committed in a repository.
    let patch = fs::read(
        json(pending(&root, &["show", "--json", &id]))["patch_file"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let repo = tmp.path().join("repo");
    fs::create_dir_all(&repo).unwrap();
    copy_tree(&project, &repo);
    git_init(&repo);
    git_commit_all(&repo);
    let pf = tmp.path().join("p.patch");
    fs::write(&pf, &patch).unwrap();
    git(&repo, &["apply", pf.to_str().unwrap()]);
    git(&repo, &["add", "-A"]);
    let theirs = git(&repo, &["diff", "--cached", "--stat=80"]).stdout;
    assert_eq!(ours, String::from_utf8(theirs).unwrap());
}

#[test]
fn colour_follows_git_rules() {
    let (_tmp, project, root) = setup();
    let id = run_pending(&project, &root)["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    let always = ok(pending(&root, &["show", "--color=always", &id])).stdout;
    let text = String::from_utf8(always).unwrap();
    assert!(text.contains("\x1b[32m+two\x1b[m"), "{text}");
    assert!(text.contains("\x1b[31m-2\x1b[m"), "{text}");
    // Not a terminal: no colour by default, none with never, none with NO_COLOR.
    for args in [&["show"][..], &["show", "--color=never"]] {
        let mut a = args.to_vec();
        a.push(&id);
        assert!(!ok(pending(&root, &a)).stdout.contains(&0x1b));
    }
    let stat = ok(pending(&root, &["show", "--stat", "--color=always", &id])).stdout;
    assert!(String::from_utf8(stat).unwrap().contains("\x1b[32m+"));
}

#[test]
fn partial_accept_by_files_then_the_rest_then_undo() {
    let (tmp, project, root) = setup();
    let original = tmp.path().join("original");
    fs::create_dir_all(&original).unwrap();
    copy_tree(&project, &original);
    let id = run_pending(&project, &root)["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    let patch = fs::read(
        json(pending(&root, &["show", "--json", &id]))["patch_file"]
            .as_str()
            .unwrap(),
    )
    .unwrap();

    // Take a.txt and src/ (a directory pathspec), leave the rest pending.
    let rec = json(pending(
        &root,
        &["apply", "--json", &id, "--only", "a.txt", "src"],
    ));
    assert_eq!(rec["outcome"], "applied");
    assert_eq!(rec["pending_id"], id.as_str());
    let paths: Vec<&str> = rec["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.txt", "src/c.txt"]);
    let rest = rec["remaining"].as_str().unwrap().to_string();
    assert_ne!(rest, id);

    // git apply --include is the oracle of the chosen part.
    let scratch = tempfile::tempdir().unwrap();
    let oracle = scratch.path().join("oracle");
    fs::create_dir_all(&oracle).unwrap();
    copy_tree(&original, &oracle);
    git_init(&oracle);
    let pf = scratch.path().join("p.patch");
    fs::write(&pf, &patch).unwrap();
    git(
        &oracle,
        &[
            "apply",
            "--include=a.txt",
            "--include=src/*",
            pf.to_str().unwrap(),
        ],
    );
    fs::remove_dir_all(oracle.join(".git")).unwrap();
    assert_eq!(content_view(&project), content_view(&oracle));

    // The rest is one pending entry, split from the original, with the other files.
    let list = json(pending(&root, &["list", "--json"]));
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "the original is gone, the rest is there");
    assert_eq!(list[0]["id"], rest.as_str());
    assert_eq!(list[0]["origin"], "split");
    assert_eq!(list[0]["split_from"], id.as_str());
    assert_eq!(list[0]["provenance"]["command"][2], WORK);
    let rest_files: Vec<&str> = list[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(rest_files, ["b.txt", "new.txt"]);

    // Later: the rest applies; the project is what the whole patch makes.
    let rec = json(pending(&root, &["apply", "--json", &rest]));
    assert_eq!(rec["outcome"], "applied");
    assert!(rec.get("remaining").is_none(), "a whole apply has no rest");
    let whole = git_apply_copy(&original, &patch, scratch.path());
    assert_eq!(content_view(&project), content_view(&whole));
    assert!(json(pending(&root, &["list", "--json"]))
        .as_array()
        .unwrap()
        .is_empty());

    // Undo takes back the rest, then the partial apply, like any apply.
    for _ in 0..2 {
        let u = json(
            bin()
                .args(["apply", "--undo", "--json", "--project"])
                .arg(&project)
                .arg("--root")
                .arg(&root)
                .output()
                .unwrap(),
        );
        assert!(!u["restored"].as_array().unwrap().is_empty());
    }
    assert_eq!(content_view(&project), content_view(&original));
}

#[test]
fn partial_accept_by_hunks_keeps_the_rest_applicable_after_drift() {
    let (tmp, project, root) = setup();
    let original = tmp.path().join("original");
    fs::create_dir_all(&original).unwrap();
    copy_tree(&project, &original);
    let id = run_pending(&project, &root)["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    let patch = fs::read(
        json(pending(&root, &["show", "--json", &id]))["patch_file"]
            .as_str()
            .unwrap(),
    )
    .unwrap();

    // The second hunk of a.txt only; --exclude is ignored for a file named by --hunks.
    let rec = json(pending(
        &root,
        &["apply", "--json", &id, "--hunks", "a.txt:2"],
    ));
    assert_eq!(rec["outcome"], "applied");
    let a = read(&project.join("a.txt"));
    assert!(a.contains("\n2\n") && a.contains("\ntwenty-eight\n"), "{a}");
    assert_eq!(read(&project.join("b.txt")), "hi\n", "not chosen");
    let rest = rec["remaining"].as_str().unwrap().to_string();

    // The user edits a.txt meanwhile, away from the remaining hunk.
    let edited = a.replace("\n15\n", "\nfifteen\n");
    fs::write(project.join("a.txt"), &edited).unwrap();

    // The rest: a.txt's first hunk (against its own pre-image), b.txt, the creation, the
    // deletion. It merges with the user's edit.
    let shown = json(pending(&root, &["show", "--json", &rest]));
    assert_eq!(shown["files"][0]["path"], "a.txt");
    assert_eq!(shown["files"][0]["hunks"], 1);
    let rec = json(pending(&root, &["apply", "--json", &rest]));
    assert_eq!(rec["outcome"], "applied", "{rec}");
    let a = read(&project.join("a.txt"));
    assert!(
        a.contains("\ntwo\n") && a.contains("\nfifteen\n") && a.contains("\ntwenty-eight\n"),
        "{a}"
    );
    // Without the user's edit, that is exactly what the whole patch makes (git's result).
    fs::write(project.join("a.txt"), a.replace("\nfifteen\n", "\n15\n")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let whole = git_apply_copy(&original, &patch, scratch.path());
    assert_eq!(content_view(&project), content_view(&whole));
}

#[test]
fn a_bad_selection_is_refused_and_changes_nothing() {
    let (tmp, project, root) = setup();
    let before = tmp.path().join("before");
    fs::create_dir_all(&before).unwrap();
    let id = run_pending(&project, &root)["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    copy_tree(&project, &before);
    for args in [
        &["--only", "nope.txt"][..],
        &["--hunks", "a.txt:3"],
        &["--hunks", "a.txt"],
        &["--exclude", "a.txt", "b.txt", "new.txt", "src"],
    ] {
        let mut a = vec!["apply", id.as_str()];
        a.extend_from_slice(args);
        let out = pending(&root, &a);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with("patchbox: "), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert_eq!(content_view(&project), content_view(&before));
    assert_eq!(
        json(pending(&root, &["list", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // --check reports on the selection and keeps everything.
    let rec = json(pending(
        &root,
        &["apply", "--check", "--json", &id, "--only", "b.txt"],
    ));
    assert_eq!(rec["check_only"], true);
    assert_eq!(rec["remaining"], Value::Null);
    assert_eq!(content_view(&project), content_view(&before));
}

#[test]
fn apply_json_reports_conflicts_per_hunk() {
    let (_tmp, project, root) = setup();
    let patch = "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-hi\n+hello\n";
    fs::write(project.join("b.txt"), "mine\n").unwrap();
    let pf = project.parent().unwrap().join("x.patch");
    fs::write(&pf, patch).unwrap();
    let out = bin()
        .args(["apply", "--json", "--project"])
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .arg(&pf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["outcome"], "refused");
    assert_eq!(rec["wrote"], false);
    assert_eq!(rec["files"][0]["status"], "conflict");
    assert_eq!(rec["files"][0]["conflicts"][0]["hunk"], 1);
    let list = json(
        bin()
            .args(["apply", "--list-undo", "--json", "--project"])
            .arg(&project)
            .arg("--root")
            .arg(&root)
            .output()
            .unwrap(),
    );
    assert!(list.as_array().unwrap().is_empty());
}

#[test]
fn completions_and_man_pages_come_from_the_command_definitions() {
    for shell in ["bash", "zsh", "fish"] {
        let out = ok(bin().args(["completions", shell]).output().unwrap()).stdout;
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("pending"), "{shell}");
        assert!(text.contains("hunks"), "{shell}: every option is there");
    }
    let man = String::from_utf8(ok(bin().arg("man").output().unwrap()).stdout).unwrap();
    assert!(
        man.starts_with(".ie") || man.contains(".TH patchbox"),
        "{man}"
    );
    let dir = tempfile::tempdir().unwrap();
    ok(bin()
        .args(["man", "--out-dir"])
        .arg(dir.path())
        .output()
        .unwrap());
    for page in [
        "patchbox.1",
        "patchbox-pending.1",
        "patchbox-pending-apply.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page}");
    }
    // bash parses its script.
    let script = dir.path().join("patchbox.bash");
    fs::write(
        &script,
        ok(bin().args(["completions", "bash"]).output().unwrap()).stdout,
    )
    .unwrap();
    let st = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_reader_that_leaves_ends_a_report_quietly_as_git() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let (_tmp, project, root) = setup();
    // A patch much larger than a pipe's buffer, so the report meets the closed pipe.
    let out = bin()
        .arg("run")
        .arg("--project")
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .args(["--id", "big", "--pending", "--json", "--"])
        .args(["sh", "-c", "seq 1 200000 > big.txt"])
        .output()
        .unwrap();
    let id = json(out)["pending_id"].as_str().unwrap().to_string();
    for args in [vec!["show", "--json", &id], vec!["show", &id]] {
        let mut child = bin()
            .arg("pending")
            .args(&args)
            .arg("--root")
            .arg(&root)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader leaves before reading a byte
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {stderr}"
        );
    }
    // A stdout that cannot be written is an error on stderr, not a panic.
    let full = fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = bin()
        .args(["completions", "bash"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("No space left"), "{stderr}");
}

#[test]
fn plan_list_diff_and_commit_speak_json_and_commits_carry_provenance() {
    use patchbox::plan::{PlanManager, Strategy};
    use patchbox::session::provenance::Provenance;
    let (_tmp, project, root) = setup();
    let mgr = PlanManager::open(&root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p1", "proj", &project, Strategy::CopyOnWrite)
        .unwrap();
    fs::write(sb.get_path(Path::new("b.txt")).unwrap(), "hi\nplan\n").unwrap();
    let plan = |args: &[&str]| {
        bin()
            .arg("plan")
            .args(args)
            .arg("--root")
            .arg(&root)
            .output()
            .unwrap()
    };
    let list = json(plan(&["list", "--json"]));
    assert_eq!(list[0]["plan"], "p1");
    assert_eq!(list[0]["sandboxes"][0]["strategy"], "copy_on_write");
    assert_eq!(list[0]["sandboxes"][0]["resource_id"], "proj");
    let diff = json(plan(&["diff", "--json", "p1"]));
    assert_eq!(diff[0]["files"][0]["path"], "b.txt");
    assert_eq!(diff[0]["files"][0]["insertions"], 1);
    assert!(diff[0]["patch"].as_str().unwrap().contains("+plan\n"));
    let stat = String::from_utf8(ok(plan(&["diff", "--stat", "p1"])).stdout).unwrap();
    assert_eq!(stat, " b.txt | 1 +\n 1 file changed, 1 insertion(+)\n");
    // The library hands out the same records (the C++ and Python faces pass them on).
    let all = patchbox::records::plan_records(&mgr, None);
    assert_eq!(list, serde_json::to_value(all).unwrap());
    let one = patchbox::records::plan_records(&mgr, Some("p1"));
    assert_eq!(list, serde_json::to_value(one).unwrap());
    let diffs = patchbox::records::plan_diff_records(&mgr, "p1").unwrap();
    assert_eq!(diff, serde_json::to_value(diffs).unwrap());

    // The library's commit with the caller's provenance; its results, as JSON, carry it.
    let given = Provenance {
        command: vec!["agent".into(), "--task".into(), "fix it".into()],
        cwd: Some("/work".into()),
        exit_status: Some(0),
        started_ms: Some(1),
        ended_ms: Some(2),
    };
    let results = mgr.commit_all_as("p1", &given).unwrap();
    assert_eq!(read(&project.join("b.txt")), "hi\nplan\n");
    assert_eq!(Provenance::from_metadata(&results[0].metadata), given);
    let as_json: Value = serde_json::from_str(&patchbox::records::to_json(&results)).unwrap();
    assert_eq!(
        as_json[0]["metadata"]["provenance.command"],
        r#"["agent","--task","fix it"]"#
    );
}

/// On a terminal (`script` gives the command one), output goes through the pager with
/// `LESS=FRX` unless `LESS` is set, in colour unless `NO_COLOR` is set; `--no-pager` and a
/// pager of `cat` write to the terminal directly.
#[test]
fn on_a_terminal_show_pages_and_colours_as_git() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no script(1) to give the command a terminal");
        return;
    }
    let (tmp, project, root) = setup();
    let id = run_pending(&project, &root)["pending_id"]
        .as_str()
        .unwrap()
        .to_string();
    let paged = tmp.path().join("paged");
    let less = tmp.path().join("less");
    let on_tty = |extra: &str, env: &[(&str, &str)]| {
        let _ = fs::remove_file(&paged);
        let cmd = format!(
            "{} pending show --root {} {extra} {id}",
            env!("CARGO_BIN_EXE_patchbox"),
            root.display()
        );
        let mut s = Command::new("script");
        s.args(["-qec", &cmd, "/dev/null"])
            .env_remove("PAGER")
            .env_remove("NO_COLOR")
            .env_remove("LESS")
            .env("TERM", "xterm")
            .env(
                "PATCHBOX_PAGER",
                format!(
                    "echo \"$LESS\" > {}; cat > {}",
                    less.display(),
                    paged.display()
                ),
            );
        for (k, v) in env {
            s.env(k, v);
        }
        let out = ok(s.output().unwrap());
        (out.stdout, fs::read(&paged).ok())
    };
    let (direct, through) = on_tty("", &[]);
    let through = String::from_utf8(through.expect("the pager ran")).unwrap();
    assert_eq!(read(&less).trim(), "FRX");
    assert!(
        through.contains("\x1b[32m+two\x1b[m"),
        "coloured: {through}"
    );
    assert!(!String::from_utf8_lossy(&direct).contains("diff --git"));

    let (_, through) = on_tty("", &[("NO_COLOR", "1"), ("LESS", "R")]);
    let through = String::from_utf8(through.expect("the pager ran")).unwrap();
    assert!(!through.contains('\x1b'), "NO_COLOR: {through}");
    assert_eq!(read(&less).trim(), "R", "the user's LESS is kept");

    let (direct, through) = on_tty("--no-pager", &[]);
    assert!(through.is_none(), "--no-pager");
    assert!(String::from_utf8_lossy(&direct).contains("diff --git"));
}

/// Every field the records carry is documented in docs/json.md (the one schema).
#[test]
fn every_field_of_the_records_is_documented() {
    fn keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    out.insert(k.clone());
                    keys(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }
    let (_tmp, project, root) = setup();
    let mut all = std::collections::BTreeSet::new();
    let run = run_pending(&project, &root);
    keys(&run, &mut all);
    let id = run["pending_id"].as_str().unwrap().to_string();
    keys(&json(pending(&root, &["list", "--json"])), &mut all);
    keys(&json(pending(&root, &["show", "--json", &id])), &mut all);
    keys(
        &json(pending(&root, &["apply", "--json", &id, "--only", "b.txt"])),
        &mut all,
    );
    let with_root = |args: &[&str]| {
        bin()
            .args(args)
            .arg("--root")
            .arg(&root)
            .arg("--project")
            .arg(&project)
            .output()
            .unwrap()
    };
    keys(
        &json(with_root(&["apply", "--list-undo", "--json"])),
        &mut all,
    );
    keys(&json(with_root(&["apply", "--undo", "--json"])), &mut all);
    for args in [
        &["sessions", "--json"][..],
        &["sessions", "prune", "--json"],
    ] {
        keys(
            &json(bin().args(args).arg("--root").arg(&root).output().unwrap()),
            &mut all,
        );
    }
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md")).unwrap();
    let missing: Vec<&String> = all
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(missing.is_empty(), "not in docs/json.md: {missing:?}");
}
