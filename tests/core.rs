//! End-to-end behaviour of the manager: patches that git and GNU patch apply, the project
//! never written, containment, chaining, routing, concurrency and drop.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use patchbox::{Decision, Error, Options, Routed, SandboxManager};

struct Env {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
    scratch: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("sandbox");
    let scratch = tmp.path().join("scratch");
    fs::create_dir_all(&project).unwrap();
    fs::create_dir_all(&scratch).unwrap();
    Env {
        _tmp: tmp,
        project,
        root,
        scratch,
    }
}

fn manager(e: &Env) -> SandboxManager {
    SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            ..Options::default()
        },
    )
    .unwrap()
}

/// Builds a varied project: text, nested dirs, exec, symlinks, binary, CRLF, odd names.
fn populate(p: &Path) {
    write(p, "README.md", b"# demo\n\nline a\nline b\nline c\n");
    write(p, "src/main.c", b"int main(void) {\n  return 0;\n}\n");
    for i in 0..40 {
        write(
            p,
            &format!("src/lib/f{i}.txt"),
            format!("file {i}\n").repeat(20).as_bytes(),
        );
    }
    write(p, "run.sh", b"#!/bin/sh\necho hi\n");
    chmod(p, "run.sh", 0o755);
    write(p, "tool.sh", b"#!/bin/sh\n");
    write(p, "noeol.txt", b"a\nb\nno newline");
    write(p, "crlf.txt", b"one\r\ntwo\r\nthree\r\n");
    write(p, "empty.txt", b"");
    write(p, "with space.txt", b"spaced\n");
    write(p, "quo\"te.txt", b"quote\n");
    write(p, "caf\u{e9}.txt", "café\n".as_bytes());
    write(
        p,
        "bin.dat",
        &(0..3000u32)
            .map(|i| (i * 7 % 256) as u8)
            .collect::<Vec<_>>(),
    );
    write(p, "gone/old.txt", b"to be deleted\n");
    symlink("README.md", p.join("link")).unwrap();
    symlink("src/main.c", p.join("flip")).unwrap();
    write(p, "becomes-link", b"plain\n");
}

/// Applies a spread of edits to a sandbox.
fn edit(s: &Path) {
    write(
        s,
        "README.md",
        b"# demo\n\nline a\nline B changed\nline c\nmore\n",
    );
    write(s, "src/new/deep/added.rs", b"fn added() {}\n");
    chmod(s, "tool.sh", 0o755);
    chmod(s, "run.sh", 0o644);
    write(s, "noeol.txt", b"a\nb\nno newline, still\n");
    write(s, "crlf.txt", b"one\r\n2\r\nthree\r\n");
    write(s, "empty.txt", b"now full\n");
    write(s, "new-empty.txt", b"");
    write(s, "with space.txt", b"spaced out\n");
    write(s, "quo\"te.txt", b"quoted\n");
    write(s, "caf\u{e9}.txt", "caf\u{e9} au lait\n".as_bytes());
    let mut bin = fs::read(s.join("bin.dat")).unwrap();
    bin[100] ^= 0xff;
    bin.extend_from_slice(&[0, 1, 2, 3, 0]);
    write(s, "bin.dat", &bin);
    write(s, "new.bin", &[0u8, 159, 146, 150, 0, 1, 2]);
    fs::remove_file(s.join("gone/old.txt")).unwrap();
    fs::remove_dir(s.join("gone")).unwrap();
    fs::remove_file(s.join("link")).unwrap();
    symlink("src/main.c", s.join("link")).unwrap();
    fs::remove_file(s.join("flip")).unwrap();
    write(s, "flip", b"now a file\n");
    fs::remove_file(s.join("becomes-link")).unwrap();
    symlink("README.md", s.join("becomes-link")).unwrap();
    fs::rename(s.join("src/lib/f3.txt"), s.join("src/lib/renamed.txt")).unwrap();
}

#[test]
fn patch_reproduces_head_with_git_apply_and_project_untouched() {
    let e = env();
    populate(&e.project);
    let before = fingerprint(&e.project, true);
    let mgr = manager(&e);
    assert_eq!(fingerprint(&e.project, true), before);
    let sb = mgr.create_sandbox("t1", None).unwrap();
    assert_eq!(content_view(&sb.path), content_view(&e.project));
    edit(&sb.path);
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(
        fingerprint(&e.project, true),
        before,
        "project must never be written"
    );
    let applied = git_apply_copy(&e.project, &res.patch, &e.scratch);
    assert_eq!(content_view(&applied), content_view(&sb.path));

    let touched: Vec<String> = res
        .files_touched
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    for want in [
        "README.md",
        "src/new/deep/added.rs",
        "gone/old.txt",
        "src/lib/f3.txt",
        "src/lib/renamed.txt",
        "caf\u{e9}.txt",
        "with space.txt",
        "flip",
        "tool.sh",
    ] {
        assert!(
            touched.contains(&want.to_string()),
            "{want} missing from {touched:?}"
        );
    }
    assert!(res.added.contains(&PathBuf::from("src/lib/renamed.txt")));
    assert!(res.deleted.contains(&PathBuf::from("gone/old.txt")));
    assert!(res.modified.contains(&PathBuf::from("README.md")));
    assert!(!touched
        .iter()
        .any(|t| t.starts_with('/') || t.contains("d-t1")));
    let text = res.patch_text();
    assert!(
        !text.contains("/dev/null/"),
        "deleted files must not be reported as /dev/null"
    );
    assert!(text.contains("old mode 100644\nnew mode 100755"));
    assert!(text.contains("GIT binary patch"));
    assert!(text.contains("\"a/caf\\303\\251.txt\""));
}

#[test]
fn text_patch_applies_with_gnu_patch() {
    let e = env();
    write(&e.project, "a.txt", b"1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    write(&e.project, "dir/b.txt", b"keep\n");
    write(&e.project, "with space.txt", b"x\n");
    write(&e.project, "noeol", b"x");
    write(&e.project, "crlf.txt", b"a\r\nb\r\n");
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("p", None).unwrap();
    write(&sb.path, "a.txt", b"1\n2\nthree\n4\n5\n6\n7\neight\n9\n");
    write(&sb.path, "new/dir/c.txt", b"new\n");
    fs::remove_file(sb.path.join("dir/b.txt")).unwrap();
    write(&sb.path, "with space.txt", b"y\n");
    write(&sb.path, "noeol", b"y");
    write(&sb.path, "crlf.txt", b"a\r\nB\r\n");
    let res = mgr.finalize_sandbox(&sb).unwrap();
    let applied = patch_p1_copy(&e.project, &res.patch, &e.scratch);
    let strip = |v: std::collections::BTreeMap<Vec<u8>, (String, bool, Vec<u8>)>| {
        v.into_iter().map(|(k, v)| (k, v.2)).collect::<Vec<_>>()
    };
    assert_eq!(strip(content_view(&applied)), strip(content_view(&sb.path)));
}

#[test]
fn unchanged_sandbox_gives_empty_patch_and_index_lines_allow_3way() {
    let e = env();
    write(&e.project, "a.txt", b"one\ntwo\nthree\n");
    git_init(&e.project);
    git_commit_all(&e.project);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("same", None).unwrap();
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert!(res.patch.is_empty());
    assert!(res.files_touched.is_empty());

    let sb2 = mgr.create_sandbox("edit", None).unwrap();
    write(&sb2.path, "a.txt", b"one\ntwo\nthree\nfour\n");
    let res = mgr.finalize_sandbox(&sb2).unwrap();
    // The user edits the project meanwhile; --3way finds the base blob by its id and merges.
    let work = e.scratch.join("work");
    fs::create_dir_all(&work).unwrap();
    common::git(
        &e.scratch,
        &["clone", "-q", e.project.to_str().unwrap(), "work"],
    );
    write(&work, "a.txt", b"ONE\ntwo\nthree\n");
    common::git_commit_all(&work);
    let pf = e.scratch.join("p.patch");
    fs::write(&pf, &res.patch).unwrap();
    common::git(&work, &["apply", "--3way", pf.to_str().unwrap()]);
    assert_eq!(
        fs::read(work.join("a.txt")).unwrap(),
        b"ONE\ntwo\nthree\nfour\n"
    );
}

#[test]
fn ignored_outputs_stay_out_of_patch() {
    let e = env();
    write(&e.project, ".gitignore", b"target/\n*.log\n");
    write(&e.project, "src/a.rs", b"a\n");
    write(&e.project, "tracked.log", b"tracked even though ignored\n");
    git_init(&e.project);
    common::git(&e.project, &["add", "-f", "."]);
    common::git(&e.project, &["commit", "-qm", "c"]);
    write(
        &e.project,
        "target/debug/out",
        b"untracked ignored, not snapshotted\n",
    );
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("b", None).unwrap();
    assert!(sb.path.join("tracked.log").exists());
    assert!(!sb.path.join("target").exists());
    // The sandbox's `.git` is its private repository, not a copy of the user's.
    assert!(sb.path.join(".git/objects/info/alternates").exists());
    write(&sb.path, "target/release/bin", b"build output\n");
    write(&sb.path, "build.log", b"log\n");
    write(&sb.path, "tracked.log", b"changed\n");
    write(&sb.path, "src/b.rs", b"b\n");
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(
        res.files_touched,
        vec![PathBuf::from("src/b.rs"), PathBuf::from("tracked.log")]
    );
    assert!(res.ignored.contains(&PathBuf::from("build.log")));
    assert!(res.ignored.contains(&PathBuf::from("target/release/bin")));
}

#[test]
fn chained_sandbox_is_cumulative_against_base() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    write(&e.project, "b.txt", b"b\n");
    let mgr = manager(&e);
    let first = mgr.create_sandbox("first", None).unwrap();
    write(&first.path, "a.txt", b"A\n");
    let second = mgr.create_sandbox("second", Some(&first)).unwrap();
    assert_eq!(second.base_dir, first.base_dir);
    assert_eq!(fs::read(second.path.join("a.txt")).unwrap(), b"A\n");
    write(&second.path, "b.txt", b"B\n");
    let res = mgr.finalize_sandbox(&second).unwrap();
    assert_eq!(
        res.files_touched,
        vec![PathBuf::from("a.txt"), PathBuf::from("b.txt")]
    );
    let applied = git_apply_copy(&e.project, &res.patch, &e.scratch);
    assert_eq!(content_view(&applied), content_view(&second.path));
    // The predecessor is unaffected by its successor.
    let r1 = mgr.finalize_sandbox(&first).unwrap();
    assert_eq!(r1.files_touched, vec![PathBuf::from("a.txt")]);
}

#[test]
fn same_size_same_second_edit_is_detected() {
    // An edit that keeps size and even restores the mtime must still be seen (ctime moves).
    let e = env();
    write(&e.project, "a.txt", b"aaaa\n");
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("racy", None).unwrap();
    let p = sb.path.join("a.txt");
    let mtime = fs::metadata(&p).unwrap().modified().unwrap();
    fs::write(&p, b"bbbb\n").unwrap();
    fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(res.files_touched, vec![PathBuf::from("a.txt")]);
}

#[test]
fn bad_ids_and_reuse_are_errors() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let mgr = manager(&e);
    for bad in ["../x", "..", ".", "", "a/b", "a b", &"x".repeat(200)] {
        let err = mgr.create_sandbox(bad, None).unwrap_err();
        assert!(matches!(err, Error::InvalidId { .. }), "{bad:?}: {err}");
    }
    mgr.create_sandbox("dup", None).unwrap();
    assert!(matches!(
        mgr.create_sandbox("dup", None),
        Err(Error::IdInUse { .. })
    ));
    assert!(!e.root.join("x").exists());
}

#[test]
fn discard_is_idempotent_and_refuses_outside_paths() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("d", None).unwrap();
    mgr.discard_sandbox(&sb).unwrap();
    assert!(!sb.path.exists());
    mgr.discard_sandbox(&sb).unwrap();

    let victim = e.scratch.join("victim");
    write(&victim, "keep.txt", b"precious\n");
    let mut evil = sb.clone();
    evil.path = victim.clone();
    assert!(matches!(
        mgr.discard_sandbox(&evil),
        Err(Error::Containment { .. })
    ));
    evil.path = mgr.session_base().join("d-d/../../../scratch/victim");
    assert!(matches!(
        mgr.discard_sandbox(&evil),
        Err(Error::Containment { .. })
    ));
    // Sibling-prefix trap: <session>-backup is not inside <session>.
    let sibling = PathBuf::from(format!("{}-backup", mgr.session_base().display()));
    write(&sibling, "keep.txt", b"precious\n");
    evil.path = sibling.clone();
    assert!(matches!(
        mgr.discard_sandbox(&evil),
        Err(Error::Containment { .. })
    ));
    evil.path = mgr.session_base().join("base");
    assert!(mgr.discard_sandbox(&evil).is_err());
    assert!(victim.join("keep.txt").exists());
    assert!(sibling.join("keep.txt").exists());
    assert!(mgr.session_base().join("base").exists());
}

#[test]
fn symlinked_sandbox_or_pending_dir_is_refused() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("s", None).unwrap();
    let victim = e.scratch.join("victim");
    write(&victim, "keep.txt", b"precious\n");
    // d-s replaced by a link pointing outside (an overlay sandbox unmounted first: only
    // then can anyone replace it).
    if sb.mode != patchbox::IsolationMode::Copy {
        let st = std::process::Command::new("umount").arg(&sb.path).status();
        assert!(st.unwrap().success());
    }
    fs::remove_dir_all(&sb.path).unwrap();
    symlink(&victim, &sb.path).unwrap();
    assert!(matches!(
        mgr.discard_sandbox(&sb),
        Err(Error::Containment { .. })
    ));
    assert!(victim.join("keep.txt").exists());
    // pending/ replaced by a link pointing outside.
    symlink(&victim, mgr.session_base().join("pending")).unwrap();
    assert!(matches!(
        mgr.write_pending_patch("x", b"diff"),
        Err(Error::Containment { .. })
    ));
    assert_eq!(fs::read_dir(&victim).unwrap().count(), 1);
}

#[test]
fn pending_patch_is_written_atomically_and_kept_on_drop() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let session;
    {
        let mgr = manager(&e);
        session = mgr.session_base().to_path_buf();
        let sb = mgr.create_sandbox("p1", None).unwrap();
        write(&sb.path, "a.txt", b"b\n");
        let res = mgr.finalize_sandbox(&sb).unwrap();
        let p = mgr.write_pending_patch("p1", &res.patch).unwrap();
        assert_eq!(p, session.join("pending/p1.patch"));
        assert_eq!(fs::read(&p).unwrap(), res.patch);
        assert!(session.join("pending/p1.pre/a.txt").exists());
        // A second patch of the same id is kept beside the first, never over it.
        let second = mgr.write_pending_patch("p1", b"other").unwrap();
        assert_eq!(second, session.join("pending/p1.2.patch"));
        assert_eq!(fs::read(&second).unwrap(), b"other");
        assert_eq!(fs::read(&p).unwrap(), res.patch);
        let leftovers: Vec<_> = fs::read_dir(session.join("pending"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }
    assert!(session.join("pending/p1.patch").exists());
    assert!(!session.join("base").exists());
    assert!(!session.join("d-p1").exists());
    // d-p1 was never discarded, but its exact patch is already pending: nothing is added.
    let listed = patchbox::session::pending::list(&e.root).unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed[0].id.ends_with("/p1"));
    assert!(listed[1].id.ends_with("/p1.2"));
    assert_eq!(listed[1].meta.delegation, "p1");
}

#[test]
fn drop_without_pending_removes_the_session() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let session;
    {
        let mgr = manager(&e);
        session = mgr.session_base().to_path_buf();
        assert!(session.is_dir(), "session dir exists from construction");
        let sb = mgr.create_sandbox("x", None).unwrap();
        fs::read(sb.path.join("a.txt")).unwrap(); // looked at, changed nothing
    }
    assert!(!session.exists());
    assert_eq!(fs::read_dir(&e.root).unwrap().count(), 0);
}

/// A sandbox neither completed nor discarded when the manager goes (an engine unwinding from
/// an exception, say) is stored as a pending patch marked abandoned: the calm path keeps the
/// work a crash would have kept.
#[test]
fn drop_keeps_abandoned_work_as_pending() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let root = e.root.clone();
    let project = e.project.clone();
    let unwound = std::thread::spawn(move || {
        let mgr = SandboxManager::with_options(
            &project,
            Options {
                root: Some(root),
                ..Options::default()
            },
        )
        .unwrap();
        let sb = mgr.create_sandbox("x", None).unwrap();
        fs::write(sb.path.join("a.txt"), b"changed\n").unwrap();
        fs::write(sb.path.join("new.txt"), b"new\n").unwrap();
        panic!("the engine fails mid-delegation");
    })
    .join();
    assert!(unwound.is_err(), "the thread panicked");
    let listed = patchbox::session::pending::list(&e.root).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].meta.abandoned && !listed[0].meta.recovered);
    assert_eq!(listed[0].meta.delegation, "x");
    let patch = fs::read(&listed[0].patch_path).unwrap();
    let text = String::from_utf8_lossy(&patch);
    assert!(text.contains("+changed") && text.contains("+new"), "{text}");
    // The patch applies to the untouched project, by git's own rules.
    let applied = git_apply_copy(&e.project, &patch, &e.scratch);
    assert_eq!(fs::read(applied.join("a.txt")).unwrap(), b"changed\n");
    assert_eq!(fs::read(applied.join("new.txt")).unwrap(), b"new\n");
    let session = listed[0].patch_path.parent().unwrap().parent().unwrap();
    assert!(!session.join("base").exists() && !session.join("d-x").exists());
}

#[test]
fn no_delegation_no_copy() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let mgr = manager(&e);
    assert!(!mgr.session_base().join("base").exists());
}

#[test]
fn completion_routing_defaults_to_pending() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let mgr = manager(&e);
    let cases: Vec<(&str, Option<patchbox::DecideFn>)> = vec![
        ("none", None),
        ("reject", Some(&|_| Ok(Decision::Reject))),
        ("err", Some(&|_| Err("consumer offline".to_string()))),
        ("panic", Some(&|_| panic!("consumer bug"))),
        ("accept", Some(&|_| Ok(Decision::Accept))),
    ];
    for (id, decide) in cases {
        let sb = mgr.create_sandbox(id, None).unwrap();
        write(&sb.path, "a.txt", id.as_bytes());
        let c = mgr.complete_sandbox(&sb, decide).unwrap();
        assert!(!sb.path.exists(), "{id}: sandbox discarded");
        match id {
            "accept" => assert_eq!(c.routed, Routed::Accepted),
            _ => {
                let Routed::Pending(p) = &c.routed else {
                    panic!("{id}: {:?}", c.routed)
                };
                assert_eq!(fs::read(p).unwrap(), c.result.patch);
            }
        }
    }
    let sb = mgr.create_sandbox("nochange", None).unwrap();
    assert_eq!(
        mgr.complete_sandbox(&sb, None).unwrap().routed,
        Routed::Unchanged
    );
}

#[test]
fn eight_threads_on_one_manager() {
    let e = env();
    for i in 0..50 {
        write(
            &e.project,
            &format!("f{i}.txt"),
            format!("{i}\n").as_bytes(),
        );
    }
    let before = fingerprint(&e.project, true);
    let mgr = Arc::new(manager(&e));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let mgr = mgr.clone();
            std::thread::spawn(move || {
                for round in 0..5 {
                    let id = format!("t{t}-r{round}");
                    let sb = mgr.create_sandbox(&id, None).unwrap();
                    let name = format!("f{t}.txt");
                    write(&sb.path, &name, id.as_bytes());
                    write(&sb.path, &format!("new-{id}.txt"), b"x\n");
                    let res = mgr.finalize_sandbox(&sb).unwrap();
                    assert_eq!(
                        res.files_touched,
                        vec![PathBuf::from(&name), PathBuf::from(format!("new-{id}.txt"))]
                    );
                    mgr.discard_sandbox(&sb).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(fingerprint(&e.project, true), before);
    let left: Vec<_> = fs::read_dir(mgr.session_base())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("d-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn special_files_are_skipped_and_reported() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let fifo = e.project.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("f", None).unwrap();
    assert!(!sb.path.join("pipe").exists());
    assert!(mgr.skipped().iter().any(|(p, _)| p == Path::new("pipe")));
}

#[test]
fn root_inside_project_is_not_copied_into_itself() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let mgr = SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.project.join(".sandboxes")),
            ..Options::default()
        },
    )
    .unwrap();
    let sb = mgr.create_sandbox("in", None).unwrap();
    assert!(!sb.path.join(".sandboxes").exists());
    assert!(sb.path.join("a.txt").exists());
}

#[test]
fn missing_project_is_a_clear_error() {
    let e = env();
    let err = SandboxManager::with_options(
        e.project.join("nope"),
        Options {
            root: Some(e.root.clone()),
            ..Options::default()
        },
    )
    .err()
    .unwrap();
    assert!(matches!(err, Error::NotADirectory { .. }));
}

/// Prunes until something is recovered (or 10 s pass). A dead session's lock can look held
/// for an instant while another test thread forks a child (the descriptor is shared until
/// the child's exec closes it); a later prune always gets it.
fn prune_until_recovered(root: &Path) -> patchbox::session::recover::PruneReport {
    let start = std::time::Instant::now();
    loop {
        let r = patchbox::session::recover::prune(root).unwrap();
        if !r.recovered.is_empty() || start.elapsed() > std::time::Duration::from_secs(10) {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn dead_session_is_recovered_live_one_untouched() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let live = manager(&e);
    let live_sb = live.create_sandbox("busy", None).unwrap();
    write(&live_sb.path, "a.txt", b"live work\n");
    let dead = manager(&e);
    let sb = dead.create_sandbox("lost", None).unwrap();
    write(&sb.path, "a.txt", b"dead work\n");
    let dead_dir = dead.keep(); // simulates a crash: nothing cleaned, lock released
    let report = prune_until_recovered(&e.root);
    assert_eq!(report.recovered.len(), 1);
    assert!(!dead_dir.join("d-lost").exists());
    assert!(!dead_dir.join("base").exists());
    let pend = patchbox::session::pending::list(&e.root).unwrap();
    assert_eq!(pend.len(), 1);
    assert!(pend[0].meta.recovered);
    let text = fs::read_to_string(&pend[0].patch_path).unwrap();
    assert!(text.contains("+dead work"));
    // The live session is untouched.
    assert!(live_sb.path.join("a.txt").exists());
    assert_eq!(
        live.finalize_sandbox(&live_sb).unwrap().files_touched.len(),
        1
    );
    // Pending patches are never pruned.
    patchbox::session::recover::prune(&e.root).unwrap();
    assert_eq!(patchbox::session::pending::list(&e.root).unwrap().len(), 1);
}

#[test]
fn reaper_waits_for_the_session_then_cleans_it_and_keeps_unfinished_work() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let mgr = manager(&e);
    let session = mgr.session_id().to_string();
    let dir = mgr.session_base().to_path_buf();
    let done = mgr.create_sandbox("done", None).unwrap();
    write(&done.path, "a.txt", b"discarded\n");
    mgr.discard_sandbox(&done).unwrap();
    let open = mgr.create_sandbox("open", None).unwrap();
    write(&open.path, "a.txt", b"unfinished\n");

    let root = e.root.clone();
    let id = session.clone();
    let reaper = std::thread::spawn(move || patchbox::session::recover::reap(&root, &id).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!reaper.is_finished(), "the session is still held");
    assert!(open.path.join("a.txt").exists());

    mgr.leave_cleanup_to_reaper();
    let report = reaper.join().unwrap();
    assert_eq!(report.pruned, std::slice::from_ref(&session));
    // The sandbox that was not discarded is recovered, everything else is gone.
    assert_eq!(report.recovered.len(), 1);
    let pend = patchbox::session::pending::list(&e.root).unwrap();
    assert_eq!(pend.len(), 1);
    assert!(fs::read_to_string(&pend[0].patch_path)
        .unwrap()
        .contains("+unfinished"));
    let mut left: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["pending", "session.meta"],
        "only the pending store (and the project it belongs to) is left"
    );
    // Reaping a session that is gone, or a name that is no session id.
    assert!(patchbox::session::recover::reap(&e.root, &session)
        .unwrap()
        .pruned
        .is_empty());
    assert!(patchbox::session::recover::reap(&e.root, "../x").is_err());
}

fn git_project(e: &Env) {
    write(&e.project, "a.txt", b"alpha\n");
    write(&e.project, "dir/b.txt", b"beta\n");
    write(&e.project, "exec.sh", b"#!/bin/sh\n");
    chmod(&e.project, "exec.sh", 0o755);
    git_init(&e.project);
    git_commit_all(&e.project);
    // Make the index strictly newer than the files, as after any later git command.
    std::thread::sleep(std::time::Duration::from_millis(20));
    common::git(&e.project, &["update-index", "--really-refresh"]);
}

#[test]
fn clean_tracked_files_are_served_from_the_object_store() {
    let e = env();
    git_project(&e);
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(&e.project, "dirty.txt", b"untracked\n");
    let before = fingerprint(&e.project, true);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("s", None).unwrap();
    assert_eq!(content_view(&sb.path), content_view(&e.project));
    let base_files: Vec<_> = content_view(&sb.base_dir).into_keys().collect();
    assert_eq!(
        base_files,
        vec![b"dirty.txt".to_vec()],
        "only the untracked file is copied"
    );
    write(&sb.path, "dir/b.txt", b"BETA\n");
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(res.files_touched, vec![PathBuf::from("dir/b.txt")]);
    assert_eq!(
        fs::read(sb.base_dir.join("dir/b.txt")).unwrap(),
        b"beta\n",
        "pre-image materialized"
    );
    let applied = git_apply_copy(&e.project, &res.patch, &e.scratch);
    assert_eq!(content_view(&applied), content_view(&sb.path));
    assert_eq!(
        fingerprint(&e.project, true),
        before,
        "repository and tree untouched"
    );
}

#[test]
fn dirty_tracked_files_are_snapshot_as_they_are_in_the_work_tree() {
    let e = env();
    git_project(&e);
    // Same size, same second: git's racy case. The snapshot must hold the new content.
    write(&e.project, "a.txt", b"ALPHA\n");
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("s", None).unwrap();
    assert_eq!(fs::read(sb.path.join("a.txt")).unwrap(), b"ALPHA\n");
    assert!(mgr.finalize_sandbox(&sb).unwrap().patch.is_empty());
}

#[test]
fn user_edits_after_the_snapshot_do_not_leak_into_later_sandboxes() {
    let e = env();
    git_project(&e);
    let mgr = manager(&e);
    let first = mgr.create_sandbox("first", None).unwrap();
    // The user keeps working in the project after the session's snapshot.
    write(&e.project, "a.txt", b"user edit\n");
    fs::remove_file(e.project.join("dir/b.txt")).unwrap();
    let second = mgr.create_sandbox("second", None).unwrap();
    assert_eq!(fs::read(second.path.join("a.txt")).unwrap(), b"alpha\n");
    assert_eq!(fs::read(second.path.join("dir/b.txt")).unwrap(), b"beta\n");
    assert!(mgr.finalize_sandbox(&second).unwrap().patch.is_empty());
    assert!(mgr.finalize_sandbox(&first).unwrap().patch.is_empty());
}

/// Recovery of a crashed session is exact: an untouched sandbox recovers nothing, a changed
/// one recovers exactly the patch finalize gives, with pre-images of the touched files only —
/// with or without the manifest kept beside the sandbox (without it, by content).
#[test]
fn recovery_is_exact_with_and_without_the_kept_manifest() {
    for keep_manifest in [true, false] {
        let e = env();
        git_project(&e);
        for i in 0..30 {
            write(
                &e.project,
                &format!("many/f{i}.txt"),
                format!("{i}\n").as_bytes(),
            );
        }
        git_commit_all(&e.project);
        std::thread::sleep(std::time::Duration::from_millis(20));
        common::git(&e.project, &["update-index", "--really-refresh"]);
        let dead = manager(&e);
        let untouched = dead.create_sandbox("untouched", None).unwrap();
        let _ = untouched;
        let sb = dead.create_sandbox("changed", None).unwrap();
        write(&sb.path, "a.txt", b"alpha\nmore\n");
        write(&sb.path, "many/new.txt", b"new\n");
        fs::remove_file(sb.path.join("dir/b.txt")).unwrap();
        let want = dead.finalize_sandbox(&sb).unwrap().patch;
        let session = dead.keep();
        // Overlay sandboxes keep no manifest: their recovery reads their upper layers.
        if !keep_manifest && sb.mode == patchbox::IsolationMode::Copy {
            for id in ["untouched", "changed"] {
                fs::remove_file(session.join(format!(".manifest-{id}"))).unwrap();
            }
        }
        let report = prune_until_recovered(&e.root);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        let pend = patchbox::session::pending::list(&e.root).unwrap();
        assert_eq!(
            pend.len(),
            1,
            "only the changed sandbox is recovered: {pend:?}"
        );
        assert_eq!(pend[0].meta.delegation, "changed");
        assert_eq!(fs::read(&pend[0].patch_path).unwrap(), want);
        let pre = pend[0].preimages.as_ref().unwrap();
        let mut kept: Vec<String> = walkdir::WalkDir::new(pre)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| e.path().strip_prefix(pre).unwrap().display().to_string())
            .collect();
        kept.sort();
        assert_eq!(
            kept,
            ["a.txt", "dir/b.txt"],
            "pre-images of touched files only"
        );
    }
}

/// A new manager recovers dead sessions on a thread of its own (the constructor returns at
/// once) and reports what it did, errors included, through `startup_recovery()`.
#[test]
fn startup_recovery_runs_aside_and_reports() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    let dead = manager(&e);
    let sb = dead.create_sandbox("lost", None).unwrap();
    write(&sb.path, "a.txt", b"work\n");
    let dead_id = dead.session_id().to_string();
    dead.keep();
    let mgr = SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    let report = mgr.startup_recovery().expect("recovery was started");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.pruned, [dead_id]);
    assert_eq!(report.recovered.len(), 1);
    assert!(String::from_utf8_lossy(&fs::read(&report.recovered[0]).unwrap()).contains("+work"));
    // Asked again, the same report; a manager told not to recover has none.
    assert_eq!(mgr.startup_recovery().unwrap().pruned, report.pruned);
    let quiet = SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            no_prune_on_start: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(quiet.startup_recovery().is_none());
}

#[test]
fn crashed_session_on_a_git_project_is_recovered_from_blobs() {
    let e = env();
    git_project(&e);
    let dead = manager(&e);
    let sb = dead.create_sandbox("lost", None).unwrap();
    write(&sb.path, "a.txt", b"alpha\nmore\n");
    fs::remove_file(sb.path.join("dir/b.txt")).unwrap();
    dead.keep();
    let report = prune_until_recovered(&e.root);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let pend = patchbox::session::pending::list(&e.root).unwrap();
    assert_eq!(pend.len(), 1);
    let patch = fs::read(&pend[0].patch_path).unwrap();
    let applied = git_apply_copy(&e.project, &patch, &e.scratch);
    let mut want = content_view(&e.project);
    want.remove(b"dir/b.txt".as_slice());
    want.get_mut(b"a.txt".as_slice()).unwrap().2 = b"alpha\nmore\n".to_vec();
    assert_eq!(content_view(&applied), want);
    let pre = pend[0].preimages.as_ref().unwrap();
    assert_eq!(fs::read(pre.join("dir/b.txt")).unwrap(), b"beta\n");
}

#[test]
fn scoped_sandbox_swaps_and_restores_also_when_unwinding() {
    use patchbox::session::scoped::ScopedSandbox;
    use std::sync::Mutex;
    let log = Mutex::new(Vec::<PathBuf>::new());
    {
        let _g = ScopedSandbox::new(
            Some(|p: &Path| log.lock().unwrap().push(p.to_path_buf())),
            "/s",
            "/o",
        );
        assert_eq!(*log.lock().unwrap(), vec![PathBuf::from("/s")]);
    }
    assert_eq!(
        *log.lock().unwrap(),
        vec![PathBuf::from("/s"), PathBuf::from("/o")]
    );
    log.lock().unwrap().clear();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _g = ScopedSandbox::new(
            Some(|p: &Path| log.lock().unwrap().push(p.to_path_buf())),
            "/s",
            "/o",
        );
        panic!("tool failed");
    }));
    assert!(r.is_err());
    assert_eq!(
        *log.lock().unwrap(),
        vec![PathBuf::from("/s"), PathBuf::from("/o")]
    );
    // No swap function: nothing happens; keep() leaves the sandbox in place.
    let _ = ScopedSandbox::new(None::<fn(&Path)>, "/s", "/o");
    log.lock().unwrap().clear();
    ScopedSandbox::new(
        Some(|p: &Path| log.lock().unwrap().push(p.to_path_buf())),
        "/s",
        "/o",
    )
    .keep();
    assert_eq!(*log.lock().unwrap(), vec![PathBuf::from("/s")]);
}

#[test]
fn progress_is_reported_while_snapshotting() {
    let e = env();
    for i in 0..300 {
        write(&e.project, &format!("d{}/f{i}", i % 7), b"x\n");
    }
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let mgr = SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            progress: Some(Arc::new(move |p| s2.lock().unwrap().push(p))),
            ..Options::default()
        },
    )
    .unwrap();
    mgr.create_sandbox("p", None).unwrap();
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .any(|p| p.files_done == 300 && p.files_total == 300),
        "{seen:?}"
    );
}

/// Tools started with `command()` are confined with Landlock: they write their sandbox, their
/// TMPDIR and the directories the caller adds, and nothing else — not the project, not
/// through an absolute symlink into it.
#[test]
fn confined_tools_cannot_write_outside_their_sandbox() {
    let e = env();
    write(&e.project, "a.txt", b"a\n");
    symlink(e.project.join("a.txt"), e.project.join("abs-link")).unwrap();
    let cache = e.scratch.join("cache");
    let elsewhere = e.scratch.join("elsewhere");
    fs::create_dir_all(&cache).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    let mgr = SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            writable_dirs: vec![cache.clone()],
            ..Options::default()
        },
    )
    .unwrap();
    if mgr.confinement() != patchbox::session::confine::Confinement::Enforced {
        eprintln!("skipped: no Landlock here ({:?})", mgr.confinement());
        return;
    }
    let before = fingerprint(&e.project, true);
    let sb = mgr.create_sandbox("x", None).unwrap();
    assert_eq!(mgr.symlinks_into_project(), [PathBuf::from("abs-link")]);
    let sh = |script: &str| {
        mgr.command(&sb, "sh")
            .args(["-c", script])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(sh("echo sandbox >> a.txt"));
    assert!(sh("echo tmp > \"$TMPDIR/t\" && test -s \"$TMPDIR/t\""));
    assert!(sh(&format!("echo cache > '{}/c'", cache.display())));
    assert!(!sh(&format!("echo bad >> '{}/a.txt'", e.project.display())));
    assert!(!sh(&format!("echo bad > '{}/new'", e.project.display())));
    assert!(!sh("echo through-link >> abs-link"));
    assert!(!sh(&format!("echo bad > '{}/x'", elsewhere.display())));
    assert!(!sh(&format!("mkdir '{}/d'", e.root.display())));
    assert_eq!(
        fingerprint(&e.project, true),
        before,
        "the project was written"
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(
        res.files_touched,
        [PathBuf::from("a.txt")],
        "TMPDIR is not in the patch"
    );
    mgr.discard_sandbox(&sb).unwrap();

    // Opting out: the tool writes where it likes (here a scratch directory).
    let free = SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            no_confine: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        free.confinement(),
        patchbox::session::confine::Confinement::Off
    );
    let sb = free.create_sandbox("y", None).unwrap();
    let ok = free
        .command(&sb, "sh")
        .args(["-c", &format!("echo free > '{}/x'", elsewhere.display())])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Lines of a patch that remove or add content (not the `---`/`+++` headers).
fn changed_lines(patch: &[u8]) -> (usize, usize) {
    let lines = || patch.split(|&b| b == b'\n');
    let minus = lines()
        .filter(|l| l.starts_with(b"-") && !l.starts_with(b"---"))
        .count();
    let plus = lines()
        .filter(|l| l.starts_with(b"+") && !l.starts_with(b"+++"))
        .count();
    (minus, plus)
}

/// A git project holding `conv` (whose content git converts: attributes or config set up by
/// `setup` before the commit) and `plain.md` (not converted), committed and then checked out
/// again with `checkout_cfg` so the work tree holds git's work-tree form of `conv`, with the
/// index's stat data matching both files — the state in which blobs used to stand in for them.
fn converted_project(
    e: &Env,
    setup: impl FnOnce(&Path),
    conv: &str,
    content: &[u8],
    checkout_cfg: &[&str],
) {
    git_init(&e.project);
    setup(&e.project);
    write(&e.project, conv, content);
    write(&e.project, "plain.md", b"plain\nfile\n");
    git_commit_all(&e.project);
    fs::remove_file(e.project.join(conv)).unwrap();
    let with_cfg = |args: &[&str]| -> Vec<String> {
        checkout_cfg
            .iter()
            .flat_map(|c| ["-c", c])
            .chain(args.iter().copied())
            .map(str::to_string)
            .collect()
    };
    let run = |args: &[&str]| {
        let a = with_cfg(args);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        common::git(&e.project, &a)
    };
    run(&["checkout", "--", conv]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    run(&["update-index", "--really-refresh"]);
    // The bug's preconditions: the work tree differs from the blob, the stat data matches.
    let blob = common::git(&e.project, &["cat-file", "blob", &format!(":{conv}")]).stdout;
    assert_ne!(
        fs::read(e.project.join(conv)).unwrap(),
        blob,
        "git converted {conv}"
    );
    let sel = patchbox::tree::select::select_project(&e.project, &[]).unwrap();
    let git = sel.git.as_ref().unwrap();
    let m = fs::metadata(&git.index_file).unwrap();
    let t = (
        std::os::unix::fs::MetadataExt::mtime(&m),
        std::os::unix::fs::MetadataExt::mtime_nsec(&m),
    );
    for (rel, converted) in [(conv, true), ("plain.md", false)] {
        let ent = sel
            .entries
            .iter()
            .find(|x| x.rel.as_bytes() == rel.as_bytes());
        let ent = ent.unwrap();
        let (ix, st) = (ent.index.as_ref().unwrap(), ent.stat.unwrap());
        assert!(ix.stat_matches(&st, t), "{rel}: index stat data matches");
        assert_eq!(ent.converted, converted, "{rel}");
    }
}

/// `git apply` of `patch` on a copy of `base` with every conversion turned off
/// (`info/attributes`, which wins over the copied `.gitattributes`): a byte-level oracle.
fn git_apply_bytes(base: &Path, patch: &[u8], scratch: &Path) -> PathBuf {
    let dir = scratch.join(format!("bytes-{}", ulid::Ulid::new()));
    fs::create_dir_all(&dir).unwrap();
    copy_tree(base, &dir);
    git_init(&dir);
    write(
        &dir,
        ".git/info/attributes",
        b"* -text -ident -filter -working-tree-encoding\n",
    );
    let pf = scratch.join(format!("p-{}.patch", ulid::Ulid::new()));
    fs::write(&pf, patch).unwrap();
    common::git(&dir, &["apply", pf.to_str().unwrap()]);
    fs::remove_dir_all(dir.join(".git")).unwrap();
    dir
}

/// A converted file reaches sandboxes and pre-images as the work tree has it: an untouched
/// sandbox gives an empty patch, a one-line edit a one-line patch that turns the work tree's
/// bytes into the sandbox's. `plain.md` is still served from the object store. With
/// `repo_check`, `git apply --check` (with those `-c` settings) also accepts the patch in the
/// user's repository itself.
fn converted_file_round_trips(e: &Env, conv: &str, line: usize, repo_check: Option<&[&str]>) {
    let before = fingerprint(&e.project, true);
    let mgr = manager(e);
    let same = mgr.create_sandbox("same", None).unwrap();
    assert_eq!(content_view(&same.path), content_view(&e.project));
    let base_files: Vec<_> = content_view(&same.base_dir).into_keys().collect();
    assert!(
        base_files.contains(&conv.as_bytes().to_vec()),
        "{conv} copied"
    );
    assert!(
        !base_files.contains(&b"plain.md".to_vec()),
        "plain.md from its blob"
    );
    let res = mgr.finalize_sandbox(&same).unwrap();
    assert!(
        res.patch.is_empty(),
        "{}",
        String::from_utf8_lossy(&res.patch)
    );

    let sb = mgr.create_sandbox("edit", None).unwrap();
    let old = fs::read(sb.path.join(conv)).unwrap();
    let mut lines: Vec<Vec<u8>> = old
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    lines[line].splice(0..0, b"EDITED ".iter().copied());
    write(&sb.path, conv, &lines.concat());
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(
        changed_lines(&res.patch),
        (1, 1),
        "{}",
        String::from_utf8_lossy(&res.patch)
    );
    assert_eq!(res.files_touched, vec![PathBuf::from(conv)]);
    assert_eq!(
        fs::read(sb.base_dir.join(conv)).unwrap(),
        fs::read(e.project.join(conv)).unwrap(),
        "pre-image is the work-tree file"
    );
    let applied = git_apply_bytes(&e.project, &res.patch, &e.scratch);
    assert_eq!(content_view(&applied), content_view(&sb.path));
    if let Some(cfg) = repo_check {
        let pf = e.scratch.join("one-line.patch");
        fs::write(&pf, &res.patch).unwrap();
        let mut args: Vec<&str> = cfg.iter().flat_map(|c| ["-c", *c]).collect();
        args.extend(["apply", "--check", pf.to_str().unwrap()]);
        common::git(&e.project, &args);
    }
    assert_eq!(fingerprint(&e.project, true), before, "project untouched");

    // The user then edits the file: later sandboxes and pre-images still hold the bytes the
    // work tree had at the snapshot (with the blob standing in, they would get the blob's).
    let orig = fs::read(e.project.join(conv)).unwrap();
    let snapshot = e.scratch.join("at-snapshot");
    fs::create_dir_all(&snapshot).unwrap();
    copy_tree(&e.project, &snapshot);
    write(&e.project, conv, b"the user's own edit\n");
    let later = mgr.create_sandbox("later", None).unwrap();
    assert_eq!(fs::read(later.path.join(conv)).unwrap(), orig);
    assert!(mgr.finalize_sandbox(&later).unwrap().patch.is_empty());
    write(&later.path, conv, &lines.concat());
    let res = mgr.finalize_sandbox(&later).unwrap();
    assert_eq!(changed_lines(&res.patch), (1, 1));
    assert_eq!(
        fs::read(later.base_dir.join(conv)).unwrap(),
        orig,
        "pre-image"
    );
    let applied = git_apply_bytes(&snapshot, &res.patch, &e.scratch);
    assert_eq!(content_view(&applied), content_view(&later.path));
}

fn numbered(n: usize, tag: &str) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("{tag} line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn eol_crlf_files_come_from_the_work_tree() {
    let e = env();
    let setup = |p: &Path| write(p, ".gitattributes", b"*.txt eol=crlf\n");
    converted_project(&e, setup, "notes.txt", &numbered(8, "note"), &[]);
    assert!(fs::read(e.project.join("notes.txt"))
        .unwrap()
        .ends_with(b"\r\n"));
    converted_file_round_trips(&e, "notes.txt", 4, Some(&[]));
}

#[test]
fn autocrlf_files_come_from_the_work_tree() {
    let e = env();
    // `-text` exempts a file from core.autocrlf: it can still come from its blob.
    let setup = |p: &Path| {
        common::git(p, &["config", "core.autocrlf", "true"]);
        write(p, ".gitattributes", b"*.md -text\n");
    };
    let cfg = ["core.autocrlf=true"];
    converted_project(&e, setup, "auto.txt", &numbered(8, "auto"), &cfg);
    assert!(fs::read(e.project.join("auto.txt"))
        .unwrap()
        .ends_with(b"\r\n"));
    converted_file_round_trips(&e, "auto.txt", 4, Some(&cfg));
}

#[test]
fn filtered_files_come_from_the_work_tree() {
    let e = env();
    let setup = |p: &Path| {
        let rot = "tr A-Za-z N-ZA-Mn-za-m";
        common::git(p, &["config", "filter.rot.clean", rot]);
        common::git(p, &["config", "filter.rot.smudge", rot]);
        write(p, ".gitattributes", b"*.r filter=rot\n");
    };
    converted_project(&e, setup, "secret.r", &numbered(8, "secret"), &[]);
    assert!(fs::read(e.project.join("secret.r"))
        .unwrap()
        .starts_with(b"secret line 1\n"));
    // No check in the repository itself: `git apply` runs the clean filter on the work-tree
    // file before applying, so a patch of work-tree bytes does not apply there (git's own
    // patches are of clean bytes).
    converted_file_round_trips(&e, "secret.r", 4, None);
}

#[test]
fn ident_files_come_from_the_work_tree() {
    let e = env();
    let setup = |p: &Path| write(p, ".gitattributes", b"*.c ident\n");
    let mut content = b"/* $Id$ */\n".to_vec();
    content.extend(numbered(12, "int x;"));
    converted_project(&e, setup, "id.c", &content, &[]);
    assert!(fs::read(e.project.join("id.c"))
        .unwrap()
        .starts_with(b"/* $Id: "));
    // `git apply` in the repository collapses `$Id: …$` before applying, so the edit is kept
    // out of the hunk context of that line; the byte-level check covers the rest.
    converted_file_round_trips(&e, "id.c", 9, Some(&[]));
}

/// Large text files (over the size from which finalize writes a patch from the files in
/// chunks instead of from memory): tracked ones (pre-image read from the project, its blob id
/// from the index) and an untracked one (pre-image copied into `base/`), edited in the middle,
/// at both ends, with a mode change and a dropped final newline. The patch is byte for byte
/// what the in-memory writer (itself checked against `git diff`) gives for the same contents,
/// and `git apply` reproduces the sandbox.
#[test]
fn large_files_patch_as_from_memory_and_applies() {
    use patchbox::patch::write::{write_file_diff, Side};
    use std::os::unix::fs::PermissionsExt;
    let e = env();
    let numbered = |tag: &str| -> Vec<u8> {
        (0..400_000)
            .map(|i| format!("{tag} line {i}\n"))
            .collect::<String>()
            .into_bytes()
    };
    git_init(&e.project);
    write(&e.project, "a-big.txt", &numbered("a"));
    write(&e.project, "dir/b big.h", &numbered("b"));
    // Older than the index git writes next: not "racily clean", so the base reads them from
    // the project with their blob ids from the index.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    git_commit_all(&e.project);
    write(&e.project, "untracked-big.log", &numbered("u"));
    let old: Vec<(&str, Vec<u8>)> = ["a-big.txt", "dir/b big.h", "untracked-big.log"]
        .iter()
        .map(|p| (*p, fs::read(e.project.join(p)).unwrap()))
        .collect();
    assert!(old.iter().all(|(_, d)| d.len() > (4 << 20)));

    let mgr = manager(&e);
    let sb = mgr.create_sandbox("big", None).unwrap();
    let edit = |rel: &str, f: &dyn Fn(&mut Vec<u8>)| {
        let p = sb.path.join(rel);
        let mut d = fs::read(&p).unwrap();
        f(&mut d);
        fs::write(&p, d).unwrap();
    };
    edit("a-big.txt", &|d| {
        d.splice(3_000_000..3_000_010, b"CHANGED".iter().copied());
        d.splice(0..0, b"first\n".iter().copied());
        d.extend_from_slice(b"last\n");
    });
    edit("dir/b big.h", &|d| {
        let n = d.len();
        d.splice(n - 30..n - 25, b"X\nY".iter().copied());
    });
    fs::set_permissions(
        sb.path.join("dir/b big.h"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    edit("untracked-big.log", &|d| {
        d.pop();
    });

    let res = mgr.finalize_sandbox(&sb).unwrap();
    let mut want = Vec::new();
    for (rel, before) in &old {
        let p = patchbox::RelPath::new(*rel).unwrap();
        let after = fs::read(sb.path.join(rel)).unwrap();
        let new_mode = if *rel == "dir/b big.h" {
            0o100755
        } else {
            0o100644
        };
        write_file_diff(
            &mut want,
            Some(Side {
                path: &p,
                mode: 0o100644,
                data: before,
            }),
            Some(Side {
                path: &p,
                mode: new_mode,
                data: &after,
            }),
        );
    }
    assert_eq!(
        String::from_utf8_lossy(&res.patch),
        String::from_utf8_lossy(&want)
    );
    let applied = git_apply_copy(&e.project, &res.patch, &e.scratch);
    for (rel, _) in &old {
        assert_eq!(
            fs::read(applied.join(rel)).unwrap(),
            fs::read(sb.path.join(rel)).unwrap(),
            "{rel}"
        );
    }
}
