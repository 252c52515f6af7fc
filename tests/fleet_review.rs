//! Reviewing pending patches kept in an object store as a plugin would: `run --pending --store
//! --json`, then `pending list|show --json`, `show --stat` and `apply --json` with `--store`,
//! the same records as for local entries. A directory store stands in for a bucket (same
//! layout, same code above the object interface); `git apply` and `git diff --stat` are the
//! oracles.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

fn bin(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_patchbox"));
    c.env("HOME", home)
        .env_remove("PATCHBOX_ROOT")
        .env_remove("PAGER")
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

#[test]
fn stored_pending_patches_have_the_json_records_of_local_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let project = tmp.path().join("project");
    write(&project, "a.txt", b"one\ntwo\nthree\n");
    write(&project, "b.txt", b"bee\n");
    git_init(&project);
    git_commit_all(&project);
    let store = tmp.path().join("store").display().to_string();
    let root = tmp.path().join("root").display().to_string();

    // The agent: the run's record says where the patch went.
    let run = json(
        bin(&home)
            .args([
                "run",
                "--root",
                &root,
                "--id",
                "fix",
                "--pending",
                "--store",
            ])
            .arg(&store)
            .arg("--json")
            .arg("--project")
            .arg(&project)
            .args([
                "--",
                "sh",
                "-c",
                "sed -i s/two/TWO/ a.txt && echo new > c.txt",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(run["delivered"], "stored", "{run}");
    let id = run["pending_id"].as_str().unwrap().to_string();
    assert!(id.ends_with("/fix"), "{id}");
    // Nothing stayed in the local pending store.
    let local = json(
        bin(&home)
            .args(["pending", "list", "--json", "--root", &root])
            .output()
            .unwrap(),
    );
    assert_eq!(local, Value::Array(vec![]));

    // The reviewer: the listing and the record, with the run's provenance.
    let list = json(
        bin(&home)
            .args(["pending", "list", "--json", "--store", &store])
            .output()
            .unwrap(),
    );
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["origin"], "delegation");
    assert!(list[0]["patch"].is_null());
    let show = json(
        bin(&home)
            .args(["pending", "show", "--json", "--store", &store, &id])
            .output()
            .unwrap(),
    );
    assert_eq!(show["provenance"]["command"][0], "sh");
    assert_eq!(show["provenance"]["exit_status"], 0);
    assert_eq!(show["project"], project.display().to_string().as_str());
    let paths: Vec<&str> = show["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.txt", "c.txt"]);
    assert!(show["patch_file"].as_str().unwrap().starts_with(&store));
    let patch = show["patch"].as_str().unwrap().to_string();

    // --stat draws what git draws for the same patch.
    let stat = ok(bin(&home)
        .args(["pending", "show", "--stat", "--store", &store, &id])
        .output()
        .unwrap());
    let stat = String::from_utf8(stat.stdout).unwrap();
    let pf = tmp.path().join("fix.patch");
    fs::write(&pf, &patch).unwrap();
    let git_stat = Command::new("git")
        .args(["apply", "--stat"])
        .arg(&pf)
        .output()
        .unwrap();
    let git_stat = String::from_utf8(git_stat.stdout).unwrap();
    let last = |s: &str| s.lines().last().unwrap_or_default().trim().to_string();
    assert_eq!(last(&stat), last(&git_stat), "{stat}\n---\n{git_stat}");

    // Partial accept is the local store's: refused here, nothing written, still stored.
    let part = bin(&home)
        .args(["pending", "apply", "--store", &store, "--root", &root])
        .arg("--project")
        .arg(&project)
        .args([&id, "--only", "a.txt"])
        .output()
        .unwrap();
    assert_eq!(part.status.code(), Some(2));
    assert_eq!(
        fs::read(project.join("a.txt")).unwrap(),
        b"one\ntwo\nthree\n"
    );

    // The whole patch applies, as `git apply` applies it to a copy.
    let expected = git_apply_copy(&project, patch.as_bytes(), &tmp.path().join("oracle"));
    let applied = json(
        bin(&home)
            .args([
                "pending", "apply", "--json", "--store", &store, "--root", &root,
            ])
            .arg("--project")
            .arg(&project)
            .arg(&id)
            .output()
            .unwrap(),
    );
    assert_eq!(applied["pending_id"], id.as_str());
    assert_eq!(applied["outcome"], "applied", "{applied}");
    for f in ["a.txt", "b.txt", "c.txt"] {
        assert_eq!(
            fs::read(project.join(f)).unwrap(),
            fs::read(expected.join(f)).unwrap(),
            "{f}"
        );
    }
    let list = json(
        bin(&home)
            .args(["pending", "list", "--json", "--store", &store])
            .output()
            .unwrap(),
    );
    assert_eq!(list, Value::Array(vec![]));
}
