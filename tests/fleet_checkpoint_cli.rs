//! `patchbox plan checkpoints|restore --store URL`: a checkpoint taken on one machine is
//! listed and restored by the command on another (its own root, HOME and copy of the
//! project), then `plan diff` shows and `plan commit` writes its changes there — against a
//! real S3-compatible server (SeaweedFS's `weed server -s3`; skipped with a message when the
//! binary is absent) and against a directory store.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use common::weed::Weed;
use common::write;
use patchbox::plan::checkpoint::{CheckpointManager, Phase};
use patchbox::plan::{PlanManager, Strategy};
use patchbox::store::{DirObjects, Objects};

fn project(dir: &Path) -> PathBuf {
    for i in 0..5 {
        write(
            dir,
            &format!("src/f{i}.txt"),
            format!("file {i}\n").as_bytes(),
        );
    }
    dir.to_path_buf()
}

fn patchbox(home: &Path, env: &[(&'static str, String)], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_patchbox"));
    c.args(args)
        .env("HOME", home)
        .env_remove("PATCHBOX_ROOT")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Machine A checkpoints through `objects`; machine B reaches the same store as `url`.
fn restored_by_the_command(objects: Arc<dyn Objects>, url: &str, env: &[(&'static str, String)]) {
    let tmp = tempfile::tempdir().unwrap();
    let a_project = project(&tmp.path().join("a/project"));
    let a_root = tmp.path().join("a/root");
    let id = {
        let plans = PlanManager::open(&a_root).unwrap();
        let sb = plans
            .get_or_create_sandbox("plan-7", "app", &a_project, Strategy::CopyOnWrite)
            .unwrap();
        let at = |rel: &str| sb.get_path(Path::new(rel)).unwrap();
        fs::write(at("src/f1.txt"), "changed\n").unwrap();
        fs::remove_file(at("src/f2.txt")).unwrap();
        fs::write(at("new.txt"), "new\n").unwrap();
        let ckpts = CheckpointManager::with_objects(&a_root, objects);
        let meta = [("step".to_string(), "3".to_string())].into();
        let c = ckpts
            .create_checkpoint(&sb, "plan-7", Phase::PostExecute.name(), meta)
            .unwrap();
        plans.cleanup_all("plan-7").unwrap();
        c.checkpoint_id
    }; // machine A's sandbox and local checkpoint copies are gone

    let b_home = tmp.path().join("b/home");
    fs::create_dir_all(&b_home).unwrap();
    let b_project = project(&tmp.path().join("b/project"));
    let b_root = tmp.path().join("b/root").display().to_string();
    let b_pb = |args: &[&str]| patchbox(&b_home, env, args);

    let listed: serde_json::Value = serde_json::from_str(&ok(&b_pb(&[
        "plan",
        "checkpoints",
        "--store",
        url,
        "--json",
        "--root",
        &b_root,
    ])))
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["checkpoint_id"], id.as_str());
    assert_eq!(listed[0]["plan_id"], "plan-7");
    assert_eq!(listed[0]["phase"], "post_execute");
    assert_eq!(listed[0]["metadata"]["step"], "3");
    let text = ok(&b_pb(&[
        "plan",
        "checkpoints",
        "--store",
        url,
        "--root",
        &b_root,
    ]));
    assert!(text.starts_with(&format!("{id}\tplan-7\t")), "{text}");

    let p = b_project.display().to_string();
    let out = ok(&b_pb(&[
        "plan",
        "restore",
        "--store",
        url,
        &id,
        "--project",
        &p,
        "--root",
        &b_root,
    ]));
    assert!(out.contains("into plan plan-7"), "{out}");
    assert_eq!(
        fs::read_to_string(b_project.join("src/f1.txt")).unwrap(),
        "file 1\n"
    );
    let diff = ok(&b_pb(&["plan", "diff", "plan-7", "--root", &b_root]));
    assert!(diff.contains("+changed") && diff.contains("+new"), "{diff}");
    ok(&b_pb(&["plan", "commit", "plan-7", "--root", &b_root]));
    assert_eq!(
        fs::read_to_string(b_project.join("src/f1.txt")).unwrap(),
        "changed\n"
    );
    assert!(!b_project.join("src/f2.txt").exists());
    assert_eq!(
        fs::read_to_string(b_project.join("new.txt")).unwrap(),
        "new\n"
    );

    // An id the store does not have: refused, and nothing is made.
    let missing = b_pb(&[
        "plan",
        "restore",
        "--store",
        url,
        "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "--project",
        &p,
        "--root",
        &b_root,
        "--plan",
        "other",
    ]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no checkpoint"));
    let plans = ok(&b_pb(&[
        "plan", "list", "other", "--json", "--root", &b_root,
    ]));
    assert!(!plans.contains("\"sandbox_id\""), "{plans}");
}

#[test]
fn a_checkpoint_in_a_directory_store_is_restored_by_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    restored_by_the_command(
        Arc::new(DirObjects::new(dir.clone())),
        &dir.display().to_string(),
        &[],
    );
}

#[test]
fn a_checkpoint_in_an_s3_bucket_is_restored_by_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut weed) = Weed::start(&tmp.path().join("weed"), "checkpoint_cli_s3") else {
        return;
    };
    weed.create_bucket("ckpt");
    restored_by_the_command(
        Arc::new(weed.objects("ckpt", "team")),
        "s3://ckpt/team",
        &weed.env(),
    );
}
