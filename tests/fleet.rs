//! Pending patches on an S3-compatible object store, end to end through the CLI, against a
//! real server (SeaweedFS's `weed server -s3`, started by each test; a test without the
//! binary says it skipped): two "machines" (separate roots, homes and copies of the project)
//! sharing a bucket, eight concurrent writers of one delegation id, a 3-way apply on a copy
//! that moved on, and the server killed during uploads.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use common::weed::Weed;
use common::*;
use patchbox::session::pending::{PendingMeta, PreimageFn as PendingPreimages};
use patchbox::session::remote::RemotePending;
use patchbox::store::{DirObjects, Objects};

/// A machine: its own home, sandbox root and copy of the project.
struct Machine {
    home: PathBuf,
    root: PathBuf,
    project: PathBuf,
    env: Vec<(&'static str, String)>,
}

impl Machine {
    fn new(
        dir: &Path,
        name: &str,
        project_from: &Path,
        env: Vec<(&'static str, String)>,
    ) -> Machine {
        let home = dir.join(name).join("home");
        let project = dir.join(name).join("project");
        fs::create_dir_all(&home).unwrap();
        let out = Command::new("git")
            .args(["clone", "-q"])
            .arg(project_from)
            .arg(&project)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Machine {
            root: dir.join(name).join("root"),
            home,
            project,
            env,
        }
    }

    fn patchbox(&self, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_patchbox"));
        c.args(args)
            .env("HOME", &self.home)
            .env_remove("PATCHBOX_ROOT");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    /// `run --pending --store URL` of `sh -c CMD` in this machine's project.
    fn run_pending(&self, store: &str, id: &str, cmd: &str) -> Output {
        let (p, r) = (
            self.project.display().to_string(),
            self.root.display().to_string(),
        );
        self.patchbox(&[
            "run",
            "--project",
            &p,
            "--root",
            &r,
            "--id",
            id,
            "--pending",
            "--store",
            store,
            "--",
            "sh",
            "-c",
            cmd,
        ])
    }
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

/// A git project with a 20-line file and a few others.
fn origin(dir: &Path) -> PathBuf {
    let p = dir.join("origin");
    let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    write(&p, "src/lib.txt", lines.as_bytes());
    write(&p, "README", b"hello\n");
    write(&p, "docs/a.md", b"a\n");
    git_init(&p);
    git_commit_all(&p);
    p
}

fn ids(listing: &str) -> Vec<String> {
    listing
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

#[test]
fn two_machines_share_a_bucket_and_a_reviewer_applies_on_a_copy_that_moved_on() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut weed) = Weed::start(&tmp.path().join("weed"), "two_machines") else {
        return;
    };
    weed.create_bucket("fleet");
    let store = "s3://fleet/team-a";
    let src = origin(tmp.path());
    let agent = Machine::new(tmp.path(), "agent", &src, weed.env());
    let reviewer = Machine::new(tmp.path(), "reviewer", &src, weed.env());

    // The agent's machine: the work goes to the bucket, nothing stays local.
    let out = agent.run_pending(
        store,
        "fix",
        "sed -i 's/^line 18$/line eighteen/' src/lib.txt && echo new > docs/b.md && rm README",
    );
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/fix (in s3://fleet/team-a)"), "{stderr}");
    let local = agent.patchbox(&[
        "pending",
        "list",
        "--root",
        &agent.root.display().to_string(),
    ]);
    assert_eq!(
        ok(&local),
        "",
        "nothing is kept locally when the store took it"
    );

    // The reviewer's machine lists and shows it …
    let listing = ok(&reviewer.patchbox(&["pending", "list", "--store", store]));
    let listed = ids(&listing);
    assert_eq!(listed.len(), 1, "{listing}");
    assert!(listing.contains("3 file(s)"), "{listing}");
    let patch = ok(&reviewer.patchbox(&["pending", "show", "--store", store, &listed[0]]));
    assert!(patch.contains("+line eighteen"), "{patch}");

    // … while its copy has moved on (a commit touching the same file elsewhere); the apply
    // merges the patch into it.
    let moved = fs::read_to_string(reviewer.project.join("src/lib.txt"))
        .unwrap()
        .replace("line 2\n", "line two\n");
    write(&reviewer.project, "src/lib.txt", moved.as_bytes());
    git_commit_all(&reviewer.project);
    let root = reviewer.root.display().to_string();
    let project = reviewer.project.display().to_string();
    let applied = reviewer.patchbox(&[
        "pending",
        "apply",
        "--store",
        store,
        "--root",
        &root,
        "--project",
        &project,
        "fix",
    ]);
    ok(&applied);
    let merged = fs::read_to_string(reviewer.project.join("src/lib.txt")).unwrap();
    assert!(
        merged.contains("line two\n") && merged.contains("line eighteen\n"),
        "{merged}"
    );
    assert_eq!(
        fs::read_to_string(reviewer.project.join("docs/b.md")).unwrap(),
        "new\n"
    );
    assert!(!reviewer.project.join("README").exists());
    // Applied: it leaves the store, for every machine.
    assert_eq!(
        ok(&agent.patchbox(&["pending", "list", "--store", store])),
        ""
    );
    // And the apply can be undone like any other.
    ok(&reviewer.patchbox(&["apply", "--undo", "--root", &root, "--project", &project]));
    assert!(reviewer.project.join("README").exists());
}

#[test]
fn a_three_way_apply_uses_the_stored_pre_images_when_the_context_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut weed) = Weed::start(&tmp.path().join("weed"), "three_way") else {
        return;
    };
    weed.create_bucket("fleet");
    let store = "s3://fleet";
    let src = origin(tmp.path());
    let agent = Machine::new(tmp.path(), "agent", &src, weed.env());
    let reviewer = Machine::new(tmp.path(), "reviewer", &src, weed.env());
    ok(&agent.run_pending(store, "d1", "sed -i 's/^line 10$/line ten/' src/lib.txt"));
    // The reviewer's copy changed the lines right around the hunk: the patch's context no
    // longer matches, so only a merge against the stored pre-image can place it.
    let moved = fs::read_to_string(reviewer.project.join("src/lib.txt"))
        .unwrap()
        .replace("line 8\n", "line eight\n")
        .replace("line 12\n", "line twelve\n");
    write(&reviewer.project, "src/lib.txt", moved.as_bytes());
    let patch = ok(&reviewer.patchbox(&["pending", "show", "--store", store, "d1"]));
    let pf = tmp.path().join("d1.patch");
    fs::write(&pf, &patch).unwrap();
    let plain = Command::new("git")
        .args(["apply", "--check"])
        .arg(&pf)
        .current_dir(&reviewer.project)
        .output()
        .unwrap();
    assert!(
        !plain.status.success(),
        "git apply without the pre-image must fail here"
    );
    let root = reviewer.root.display().to_string();
    let project = reviewer.project.display().to_string();
    ok(&reviewer.patchbox(&[
        "pending",
        "apply",
        "--store",
        store,
        "--root",
        &root,
        "--project",
        &project,
        "d1",
    ]));
    let merged = fs::read_to_string(reviewer.project.join("src/lib.txt")).unwrap();
    let expected = moved.replace("line 10\n", "line ten\n");
    assert_eq!(merged, expected);
}

#[test]
fn eight_concurrent_writers_of_one_delegation_id_keep_eight_patches() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut weed) = Weed::start(&tmp.path().join("weed"), "eight_writers") else {
        return;
    };
    weed.create_bucket("fleet");
    let store = "s3://fleet/eight";
    let src = origin(tmp.path());
    // Eight machines, each running delegation "d1" at once.
    let machines: Vec<Machine> = (0..8)
        .map(|i| Machine::new(tmp.path(), &format!("m{i}"), &src, weed.env()))
        .collect();
    let handles: Vec<_> = machines
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            std::thread::spawn(move || {
                let out = m.run_pending(
                    "s3://fleet/eight",
                    "d1",
                    &format!("echo writer-{i} >> README"),
                );
                (i, out)
            })
        })
        .collect();
    for h in handles {
        let (i, out) = h.join().unwrap();
        assert!(
            out.status.success(),
            "writer {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let reader = Machine::new(tmp.path(), "reader", &src, weed.env());
    let listing = ok(&reader.patchbox(&["pending", "list", "--store", store]));
    let listed = ids(&listing);
    assert_eq!(listed.len(), 8, "{listing}");
    let mut writers: Vec<String> = listed
        .iter()
        .map(|id| {
            let p = ok(&reader.patchbox(&["pending", "show", "--store", store, id]));
            p.lines()
                .find(|l| l.starts_with("+writer-"))
                .unwrap()
                .to_string()
        })
        .collect();
    writers.sort();
    let expected: Vec<String> = (0..8).map(|i| format!("+writer-{i}")).collect();
    assert_eq!(writers, expected);
    // A bare delegation id no longer names one patch.
    let ambiguous = reader.patchbox(&["pending", "show", "--store", store, "d1"]);
    assert_eq!(ambiguous.status.code(), Some(2));

    // Eight writers in one session (one engine's threads) race for the same names: the
    // create-only writes of the records give them d1, d1.2, … d1.8, none overwritten.
    let objects: Arc<dyn Objects> = Arc::new(weed.objects("fleet", "one-session"));
    let names = eight_in_one_session(RemotePending::new(objects));
    let expected: Vec<String> = std::iter::once("d1".to_string())
        .chain((2..=8).map(|n| format!("d1.{n}")))
        .collect();
    assert_eq!(names, expected);
}

/// Eight threads store a patch of delegation `d1` in one session at once; returns the
/// names listed afterwards, sorted, after checking each patch is its writer's.
fn eight_in_one_session(store: RemotePending) -> Vec<String> {
    let session = patchbox::id::next_string();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (store, session) = (store.clone(), session.clone());
            std::thread::spawn(move || {
                let meta = PendingMeta {
                    session,
                    delegation: "d1".into(),
                    project: "/p".into(),
                    created: 1,
                    ..PendingMeta::default()
                };
                let patch = format!("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+{i}\n");
                (store.store(&meta, patch.as_bytes(), None).unwrap(), patch)
            })
        })
        .collect();
    let mut names = Vec::new();
    for h in handles {
        let (id, patch) = h.join().unwrap();
        assert_eq!(store.read(&id).unwrap(), patch.as_bytes());
        names.push(id.rsplit('/').next().unwrap().to_string());
    }
    let mut listed: Vec<String> = store
        .list()
        .unwrap()
        .into_iter()
        .filter(|e| e.record.session == session)
        .map(|e| e.record.name)
        .collect();
    listed.sort_by_key(|n| n.split('.').nth(1).map_or(1, |s| s.parse::<u32>().unwrap()));
    names.sort_by_key(|n| n.split('.').nth(1).map_or(1, |s| s.parse::<u32>().unwrap()));
    assert_eq!(names, listed);
    listed
}

#[test]
fn eight_writers_of_one_id_in_a_directory_store_keep_eight_patches() {
    let tmp = tempfile::tempdir().unwrap();
    let objects: Arc<dyn Objects> = Arc::new(DirObjects::new(tmp.path().join("store")));
    let names = eight_in_one_session(RemotePending::new(objects));
    assert_eq!(names.len(), 8);
}

#[test]
fn an_unreachable_store_keeps_the_work_locally_and_push_sends_it_later() {
    let tmp = tempfile::tempdir().unwrap();
    let src = origin(tmp.path());
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = vec![
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ACCESS_KEY_ID", "k".into()),
        ("AWS_SECRET_ACCESS_KEY", "s".into()),
        ("AWS_ALLOW_HTTP", "true".into()),
    ];
    let m = Machine::new(tmp.path(), "m", &src, env);
    let out = m.run_pending("s3://fleet/x", "d1", "echo more >> README");
    assert_eq!(
        out.status.code(),
        Some(74),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kept as pending patch") && stderr.contains("pending push"),
        "{stderr}"
    );
    let root = m.root.display().to_string();
    let local = ok(&m.patchbox(&["pending", "list", "--root", &root]));
    assert_eq!(ids(&local).len(), 1, "{local}");
    // Still unreachable: push keeps it and says so with the same status.
    let push = m.patchbox(&[
        "pending",
        "push",
        "--store",
        "s3://fleet/x",
        "--root",
        &root,
    ]);
    assert_eq!(push.status.code(), Some(74));
    assert_eq!(
        ids(&ok(&m.patchbox(&["pending", "list", "--root", &root]))).len(),
        1
    );
    // A directory store is reachable: push sends it there, with its pre-image.
    let dir = tmp.path().join("shared").display().to_string();
    ok(&m.patchbox(&["pending", "push", "--store", &dir, "--root", &root]));
    assert_eq!(ok(&m.patchbox(&["pending", "list", "--root", &root])), "");
    let listing = ok(&m.patchbox(&["pending", "list", "--store", &dir]));
    assert_eq!(ids(&listing), ids(&local));
    let usage = ok(&m.patchbox(&["pending", "usage", "--store", &dir]));
    assert!(usage.contains("pre-images\t6 bytes"), "{usage}");
}

#[test]
fn a_server_killed_during_uploads_leaves_no_half_patch_and_nothing_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut weed) = Weed::start(&tmp.path().join("weed"), "killed_server") else {
        return;
    };
    weed.create_bucket("fleet");
    let store = "s3://fleet/k";
    // A project of 300 files of 32 KiB: each patch rewrites all of them, so its upload
    // (300 pre-images, then the patch) takes a while.
    let src = tmp.path().join("origin");
    for i in 0..300 {
        write(
            &src,
            &format!("f/{i:03}.txt"),
            format!("{i}\n").repeat(8000).as_bytes(),
        );
    }
    git_init(&src);
    git_commit_all(&src);
    let writers: Vec<Machine> = (0..4)
        .map(|i| Machine::new(tmp.path(), &format!("w{i}"), &src, weed.env()))
        .collect();
    let handles: Vec<_> = writers
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            std::thread::spawn(move || {
                let out = m.run_pending(
                    "s3://fleet/k",
                    "big",
                    &format!("for f in f/*.txt; do echo writer-{i} >> $f; done"),
                );
                (m, out)
            })
        })
        .collect();
    // Kill the server as soon as uploads have begun (some pre-image is in): the writers are
    // cut in the middle of their uploads.
    let probe = Machine::new(tmp.path(), "probe", &src, weed.env());
    let objects = weed.objects("fleet", "k");
    let prefix = patchbox::store::Key::new("pending/objects").unwrap();
    while objects.list(&prefix).unwrap().is_empty() && !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let cut = !handles.iter().all(|h| h.is_finished());
    weed.kill();
    let mut kept = 0;
    let mut machines = Vec::new();
    for h in handles {
        let (m, out) = h.join().unwrap();
        match out.status.code() {
            Some(0) => {}
            Some(74) => kept += 1,
            other => panic!("{other:?}: {}", String::from_utf8_lossy(&out.stderr)),
        }
        machines.push(m);
    }
    if cut {
        // A writer still running when the server died could not finish its upload.
        assert!(kept >= 1, "no writer kept its work locally");
    }
    weed.restart();
    // Every listed patch is whole: it shows, and its bytes match the id its record holds
    // (`show` checks); what did not finish is not listed but kept on its machine.
    let listing = ok(&probe.patchbox(&["pending", "list", "--store", store]));
    let listed = ids(&listing);
    for id in &listed {
        let p = ok(&probe.patchbox(&["pending", "show", "--store", store, id]));
        assert_eq!(p.matches("diff --git").count(), 300);
    }
    assert_eq!(listed.len() + kept, 4, "{listing}");
    for m in &machines {
        let root = m.root.display().to_string();
        ok(&m.patchbox(&["pending", "push", "--store", store, "--root", &root]));
    }
    let listing = ok(&probe.patchbox(&["pending", "list", "--store", store]));
    assert_eq!(ids(&listing).len(), 4, "{listing}");
    // What the cut uploads left is unreferenced and goes with a gc; the patches stay whole.
    ok(&probe.patchbox(&["pending", "gc", "--store", store, "--grace", "0"]));
    for id in ids(&listing) {
        let p = ok(&probe.patchbox(&["pending", "show", "--store", store, &id]));
        assert_eq!(p.matches("diff --git").count(), 300);
    }
}

#[test]
fn a_cut_upload_is_never_listed_and_gc_removes_only_what_nothing_refers_to() {
    let tmp = tempfile::tempdir().unwrap();
    let objects: Arc<dyn Objects> = Arc::new(DirObjects::new(tmp.path().join("store")));
    let store = RemotePending::new(objects.clone());
    let meta = PendingMeta {
        session: patchbox::id::next_string(),
        delegation: "d1".into(),
        project: "/p".into(),
        created: 1,
        ..PendingMeta::default()
    };
    let patch = b"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
    let rel = patchbox::RelPath::new("f").unwrap();
    let read = |_: &patchbox::RelPath| {
        Ok(Some((
            patchbox::tree::snapshot::NodeKind::File { executable: false },
            b"a\n".to_vec(),
        )))
    };
    let paths = [rel];
    let id = store
        .store(&meta, patch, Some((&paths[..], &read as PendingPreimages)))
        .unwrap();
    // What an upload cut before its record leaves: a pre-image and a patch, no record.
    let key = |k: &str| patchbox::store::Key::new(k).unwrap();
    objects
        .put_new(
            &key("pending/objects/0123456789abcdef0123456789abcdef01234567"),
            b"x",
        )
        .unwrap();
    objects
        .put_new(
            &key("pending/patches/01M92M0000000000000000000A.patch"),
            b"half",
        )
        .unwrap();
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(listed, vec![id.clone()]);
    // Young leftovers may belong to an upload still running: spared.
    assert_eq!(store.gc(std::time::Duration::from_secs(3600)).unwrap(), 0);
    assert_eq!(store.gc(std::time::Duration::ZERO).unwrap(), 2);
    assert_eq!(store.read(&id).unwrap(), patch);
    let u = store.usage().unwrap();
    assert_eq!(
        (
            u.entries,
            u.object_bytes,
            u.object_bytes_unshared,
            u.patch_bytes
        ),
        (1, 2, 2, patch.len() as u64)
    );
    // Dropped: the entry and its patch go; the pre-image waits for a gc.
    store.drop_pending(&id).unwrap();
    assert!(store.list().unwrap().is_empty());
    assert_eq!(store.gc(std::time::Duration::ZERO).unwrap(), 1);
    assert!(objects.list(&key("pending")).unwrap().is_empty());
}
