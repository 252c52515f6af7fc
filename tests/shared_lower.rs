//! Shared lower layers: the second overlay session of a git project stacks the layer the
//! first one wrote under the root, and its `.lower/` holds only the difference — yet what
//! tools see through `d-<id>/` is, path for path (type, mode, content, mtime), the copy a
//! `copy` session makes, `git status` there is clean, and the same edits give the same patch.
//! A project that moved on gets a new layer, and a layer no session names is removed.
//!
//! Every test lowers the threshold (`PATCHBOX_SHARED_LOWER_MIN=1`) so small projects use a
//! shared layer; a machine where no overlay can be mounted skips with a message.

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::overlay::{manager, overlay_manager, Env};
use common::{fingerprint, git, git_commit_all, git_init, prune_once_released, write};
use patchbox::session::shared_lower;
use patchbox::Isolation;

fn setup() {
    // Set before any manager reads it; every test of this binary wants the same value.
    std::env::set_var("PATCHBOX_SHARED_LOWER_MIN", "1");
}

fn env() -> Env {
    setup();
    common::overlay::env()
}

fn populate(p: &Path) {
    write(p, "a.txt", b"alpha\n");
    write(p, "touched.txt", b"touched\n");
    write(p, "script.sh", b"#!/bin/sh\necho hi\n");
    write(p, "chmod.txt", b"becomes executable\n");
    write(p, "dir/b.txt", b"bravo\n");
    write(p, "gone/one.txt", b"one\n");
    write(p, "gone/deeper/two.txt", b"two\n");
    write(p, "partly/keep.txt", b"keep\n");
    write(p, "partly/lost.txt", b"lost\n");
    write(p, "x", b"a file that becomes a directory\n");
    write(p, "d2/f1", b"a directory that becomes a file\n");
    write(p, "edited.c", b"int main(void) { return 0; }\n");
    fs::set_permissions(p.join("script.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", p.join("link")).unwrap();
    git_init(p);
    git_commit_all(p);
}

/// What a user does between two sessions, without committing.
fn change(p: &Path) {
    write(p, "edited.c", b"int main(void) { return 1; }\n");
    fs::set_permissions(p.join("chmod.txt"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_dir_all(p.join("gone")).unwrap();
    fs::remove_file(p.join("partly/lost.txt")).unwrap();
    // Same content, new mtime: the copy keeps the new mtime, so must the view.
    let f = fs::File::options()
        .write(true)
        .open(p.join("touched.txt"))
        .unwrap();
    f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
        .unwrap();
    fs::remove_file(p.join("x")).unwrap();
    write(p, "x/inner.txt", b"now a directory\n");
    fs::remove_dir_all(p.join("d2")).unwrap();
    write(p, "d2", b"now a file\n");
    write(p, "untracked.txt", b"untracked\n");
    write(p, "dir/new.txt", b"untracked in a tracked directory\n");
}

/// Writes `data` into seven of the files `populate` commits: far more than the tenth of them
/// that makes a later session write a new layer.
fn rewrite_tracked(p: &Path, data: &[u8]) {
    for f in [
        "a.txt",
        "touched.txt",
        "chmod.txt",
        "dir/b.txt",
        "edited.c",
        "x",
        "d2/f1",
    ] {
        write(p, f, data);
    }
}

fn layers(e: &Env) -> Vec<String> {
    let store = e.root.join("lowers");
    let mut out = Vec::new();
    for proj in fs::read_dir(&store).into_iter().flatten().flatten() {
        for l in fs::read_dir(proj.path()).unwrap().flatten() {
            let name = l.file_name().to_string_lossy().into_owned();
            if name != shared_lower::PROJECT_FILE {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

fn files_in(dir: &Path) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .flatten()
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            e.path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|p| !p.starts_with(".git/"))
        .collect()
}

#[test]
fn a_later_session_sees_exactly_the_copys_tree_over_the_shared_layer() {
    let e = env();
    populate(&e.project);
    let Some(first) = overlay_manager(&e) else {
        return;
    };
    let s1 = first.create_sandbox("one", None).unwrap();
    assert_eq!(
        layers(&e).len(),
        1,
        "the first session wrote one shared layer"
    );
    let lower1 = first.session_base().join(".lower");
    assert!(
        !lower1.join("a.txt").exists(),
        "a clean tracked file is served by the shared layer, not copied into .lower/"
    );
    first.discard_sandbox(&s1).unwrap();
    drop(first);

    change(&e.project);
    let over = manager(&e, Isolation::Overlay);
    let copy = manager(&e, Isolation::Copy);
    let o = over.create_sandbox("o", None).unwrap();
    let c = copy.create_sandbox("c", None).unwrap();
    assert_eq!(layers(&e).len(), 1, "the second session reused the layer");
    let delta = files_in(&over.session_base().join(".lower"));
    assert!(
        !delta
            .iter()
            .any(|p| p == "a.txt" || p == "dir/b.txt" || p == "script.sh"),
        "unchanged tracked files stay in the shared layer: {delta:?}"
    );
    assert!(delta.iter().any(|p| p == "untracked.txt"), "{delta:?}");
    // `.lower/` takes the session's copies as links of `base/`'s (neither is ever written in
    // place): one inode each, and a write through the view reaches neither.
    let in_base = over.session_base().join("base/untracked.txt");
    let in_lower = over.session_base().join(".lower/untracked.txt");
    assert_eq!(inode(&in_base), inode(&in_lower), "linked, not copied");
    assert_eq!(
        fingerprint(&o.path, false),
        fingerprint(&c.path, false),
        "the overlay view over the shared layer is the copy, path for path"
    );
    // The private repository sees the view as the snapshot: clean.
    let st = git(&o.path, &["status", "--porcelain", "--untracked-files=no"]);
    assert!(st.status.success());
    assert_eq!(
        String::from_utf8_lossy(&st.stdout),
        "",
        "git status in the overlay view"
    );

    // A write through the view to a linked file reaches neither `base/` nor `.lower/`
    // (the file is removed below, in both sandboxes).
    fs::OpenOptions::new()
        .append(true)
        .open(o.path.join("untracked.txt"))
        .unwrap()
        .write_all(b"more\n")
        .unwrap();
    assert_eq!(fs::read(&in_base).unwrap(), b"untracked\n");
    assert_eq!(fs::read(&in_lower).unwrap(), b"untracked\n");

    // The same edits give the same patch.
    for d in [&o.path, &c.path] {
        write(d, "a.txt", b"alpha, edited\n");
        fs::remove_file(d.join("dir/b.txt")).unwrap();
        write(d, "brand/new.txt", b"new\n");
        fs::remove_file(d.join("untracked.txt")).unwrap();
    }
    let po = over.finalize_sandbox(&o).unwrap().patch;
    let pc = copy.finalize_sandbox(&c).unwrap().patch;
    assert!(!po.is_empty());
    assert_eq!(String::from_utf8_lossy(&po), String::from_utf8_lossy(&pc));
}

#[test]
fn a_project_that_moved_on_gets_a_new_layer_and_the_unused_one_goes() {
    let e = env();
    populate(&e.project);
    let Some(first) = overlay_manager(&e) else {
        return;
    };
    let held = first.create_sandbox("one", None).unwrap();
    let old = layers(&e);
    assert_eq!(old.len(), 1);

    // Most tracked files rewritten and committed: the old layer no longer serves the project.
    rewrite_tracked(&e.project, b"rewritten\n");
    git_commit_all(&e.project);
    let second = manager(&e, Isolation::Overlay);
    let s2 = second.create_sandbox("two", None).unwrap();
    let now = layers(&e);
    assert_eq!(
        now.len(),
        2,
        "a new layer, and the one the live session stacks is kept"
    );
    assert_eq!(fs::read(s2.path.join("a.txt")).unwrap(), b"rewritten\n");
    assert_eq!(fs::read(held.path.join("a.txt")).unwrap(), b"alpha\n");
    second.discard_sandbox(&s2).unwrap();
    drop(second);

    first.discard_sandbox(&held).unwrap();
    drop(first);
    // The next layer made finds the first one unused.
    rewrite_tracked(&e.project, b"again\n");
    git_commit_all(&e.project);
    let third = manager(&e, Isolation::Overlay);
    let s3 = third.create_sandbox("three", None).unwrap();
    let last = layers(&e);
    assert_eq!(last.len(), 1, "unused layers removed: {last:?}");
    assert!(!old.contains(&last[0]) && !now.contains(&last[0]));
    third.discard_sandbox(&s3).unwrap();
}

#[test]
fn a_crashed_session_over_a_shared_layer_is_recovered_with_its_work() {
    let e = env();
    populate(&e.project);
    let Some(mgr) = overlay_manager(&e) else {
        return;
    };
    let sb = mgr.create_sandbox("work", None).unwrap();
    write(&sb.path, "a.txt", b"alpha, from the crashed session\n");
    fs::remove_file(sb.path.join("dir/b.txt")).unwrap();
    // Kept as a crashed engine leaves it (unmounted, the record and layers in place): the
    // next prune recovers it by mounting the recorded layers again.
    let session = mgr.keep();
    assert!(session.join(".lower.shared").exists());

    let report = prune_once_released(&e.root);
    assert!(report.errors.is_empty(), "{report:?}");
    let pending = patchbox::session::pending::list(&e.root).unwrap();
    let p = pending
        .iter()
        .find(|p| p.id.ends_with("/work"))
        .expect("the crashed delegation's work is pending");
    let patch = fs::read_to_string(&p.patch_path).unwrap();
    assert!(
        patch.contains("+alpha, from the crashed session"),
        "{patch}"
    );
    assert!(patch.contains("deleted file mode"), "{patch}");
    assert!(
        !session.join("base").exists() && !session.join(".lower").exists(),
        "the recovered session keeps only its pending patches"
    );
}

/// Prunes (as [`prune_once_released`]) until `want` shared layers were removed in all, or
/// 100 tries; returns how many were. A layer looks held for an instant while another test
/// thread forks (the child shares the manifest's lock until its exec): a later prune takes
/// it.
fn prune_removing_layers(root: &Path, want: usize) -> usize {
    let mut removed = 0;
    for _ in 0..100 {
        let report = prune_once_released(root);
        assert!(report.errors.is_empty(), "{report:?}");
        removed += report.shared_layers_removed;
        if removed >= want {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    removed
}

fn inode(p: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.dev(), m.ino())
}

/// The one shared layer's `tree/`.
fn shared_tree(e: &Env) -> std::path::PathBuf {
    let store = e.root.join("lowers");
    let proj = fs::read_dir(&store)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let layer = fs::read_dir(&proj)
        .unwrap()
        .flatten()
        .find(|l| {
            l.file_type().is_ok_and(|t| t.is_dir())
                && !l.file_name().to_string_lossy().starts_with('.')
        })
        .unwrap();
    layer.path().join("tree")
}

#[test]
fn finalize_links_pre_images_from_the_layers_and_leaves_the_layers_intact() {
    let e = env();
    populate(&e.project);
    let Some(first) = overlay_manager(&e) else {
        return;
    };
    let s1 = first.create_sandbox("one", None).unwrap();
    write(&s1.path, "a.txt", b"alpha, edited\n");
    write(&s1.path, "script.sh", b"#!/bin/sh\necho edited\n");
    let r1 = first.finalize_sandbox(&s1).unwrap();
    let tree = shared_tree(&e);
    for (f, content, exec) in [
        ("a.txt", &b"alpha\n"[..], false),
        ("script.sh", &b"#!/bin/sh\necho hi\n"[..], true),
    ] {
        let pre = r1.base_dir.join(f);
        assert_eq!(fs::read(&pre).unwrap(), content, "{f}: the pre-image");
        let mode = fs::metadata(&pre).unwrap().permissions().mode();
        assert_eq!(mode & 0o100 != 0, exec, "{f}: its mode {mode:o}");
        assert_eq!(
            inode(&pre),
            inode(&tree.join(f)),
            "{f}: linked from the shared layer, not copied"
        );
    }
    first.discard_sandbox(&s1).unwrap();
    drop(first);
    assert_eq!(
        fs::read(tree.join("a.txt")).unwrap(),
        b"alpha\n",
        "the session's end leaves the shared layer's file"
    );

    // One committed change: the next session's `.lower/` holds that blob itself.
    write(&e.project, "edited.c", b"int main(void) { return 2; }\n");
    git_commit_all(&e.project);
    std::thread::sleep(std::time::Duration::from_millis(20));
    git(&e.project, &["update-index", "--really-refresh"]);
    let over = manager(&e, Isolation::Overlay);
    let copy = manager(&e, Isolation::Copy);
    let o = over.create_sandbox("o", None).unwrap();
    let c = copy.create_sandbox("c", None).unwrap();
    assert_eq!(layers(&e).len(), 1, "the layer is reused");
    let lower = over.session_base().join(".lower");
    assert!(lower.join("edited.c").is_file(), "{:?}", files_in(&lower));
    for d in [&o.path, &c.path] {
        write(d, "edited.c", b"int main(void) { return 3; }\n");
        write(d, "a.txt", b"alpha, again\n");
    }
    let ro = over.finalize_sandbox(&o).unwrap();
    let rc = copy.finalize_sandbox(&c).unwrap();
    assert_eq!(ro.patch, rc.patch, "the same patch as the copy path");
    assert_eq!(
        inode(&ro.base_dir.join("edited.c")),
        inode(&lower.join("edited.c")),
        "linked from the session's own lower layer"
    );
    assert_eq!(
        inode(&ro.base_dir.join("a.txt")),
        inode(&tree.join("a.txt"))
    );
    for (f, content) in [
        ("edited.c", &b"int main(void) { return 2; }\n"[..]),
        ("a.txt", &b"alpha\n"[..]),
    ] {
        assert_eq!(fs::read(ro.base_dir.join(f)).unwrap(), content, "{f}");
        assert_eq!(fs::read(rc.base_dir.join(f)).unwrap(), content, "{f}");
        // The copy path has no layer to link from: its pre-images are files of their own.
        assert_ne!(inode(&rc.base_dir.join(f)), inode(&ro.base_dir.join(f)));
    }
    // A sandbox made after the finalize still sees the snapshot through the linked layers.
    let later = over.create_sandbox("later", None).unwrap();
    assert_eq!(
        fs::read(later.path.join("edited.c")).unwrap(),
        b"int main(void) { return 2; }\n"
    );
    assert_eq!(fs::read(later.path.join("a.txt")).unwrap(), b"alpha\n");
}

#[test]
fn prune_sweeps_superseded_layers_and_abandoned_writes_but_keeps_the_newest() {
    let e = env();
    populate(&e.project);
    let Some(first) = overlay_manager(&e) else {
        return;
    };
    let held = first.create_sandbox("one", None).unwrap();
    // The project moves on while the first session still stacks its layer: a second layer.
    rewrite_tracked(&e.project, b"rewritten\n");
    git_commit_all(&e.project);
    let second = manager(&e, Isolation::Overlay);
    let s2 = second.create_sandbox("two", None).unwrap();
    let both = layers(&e);
    assert_eq!(both.len(), 2);
    second.discard_sandbox(&s2).unwrap();
    drop(second);
    first.discard_sandbox(&held).unwrap();
    drop(first);
    assert_eq!(
        layers(&e),
        both,
        "nothing removes the old layer once its session ends"
    );

    // What a writer that died leaves: an hour-old layer being written, and a fresh one (a
    // live writer's, as far as anyone can tell).
    let store = fs::read_dir(e.root.join("lowers"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let old = ulid::Ulid::from_datetime(
        std::time::SystemTime::now() - std::time::Duration::from_secs(7200),
    );
    let dead = store.join(format!(".creating-{old}"));
    let fresh = store.join(format!(".creating-{}", ulid::Ulid::new()));
    for d in [&dead, &fresh] {
        write(d, "tree/a.txt", b"half written\n");
    }

    assert_eq!(prune_removing_layers(&e.root, 1), 1);
    let left = layers(&e);
    assert!(
        left.contains(&both[1]) && !left.contains(&both[0]),
        "the newest layer stays, the superseded one goes: {left:?}"
    );
    assert!(!dead.exists(), "an abandoned write is removed");
    assert!(fresh.exists(), "a write that may be live is left");

    // The next session stacks the layer that stayed, without writing a new one.
    fs::remove_dir_all(&fresh).unwrap();
    let third = manager(&e, Isolation::Overlay);
    let s3 = third.create_sandbox("three", None).unwrap();
    assert_eq!(fs::read(s3.path.join("a.txt")).unwrap(), b"rewritten\n");
    assert_eq!(layers(&e), vec![both[1].clone()]);
    // Nothing more to sweep, and the live session's view is untouched.
    let again = patchbox::session::recover::prune(&e.root).unwrap();
    assert_eq!(again.shared_layers_removed, 0);
    assert_eq!(fs::read(s3.path.join("a.txt")).unwrap(), b"rewritten\n");
}

/// The newest layer stays for the project's next session, unless the project is gone: then
/// an unbounded prune removes it too, and the project's store with it.
#[test]
fn prune_removes_the_layers_of_a_project_that_is_gone() {
    let e = env();
    populate(&e.project);
    let Some(mgr) = overlay_manager(&e) else {
        return;
    };
    let s = mgr.create_sandbox("one", None).unwrap();
    mgr.discard_sandbox(&s).unwrap();
    drop(mgr);
    assert_eq!(layers(&e).len(), 1);
    let store = shared_lower::project_dir(&e.root, &fs::canonicalize(&e.project).unwrap());
    assert!(store.join(shared_lower::PROJECT_FILE).exists());

    // While the project exists, its newest layer stays.
    let report = prune_once_released(&e.root);
    assert_eq!(report.shared_layers_removed, 0, "{report:?}");
    assert_eq!(layers(&e).len(), 1);

    fs::remove_dir_all(&e.project).unwrap();
    assert_eq!(prune_removing_layers(&e.root, 1), 1);
    assert!(layers(&e).is_empty());
    assert!(!store.exists(), "the store of a gone project is removed");
}

// ---- plans on the same layers ---------------------------------------------------------------

/// A git project of a hundred committed files of nine lines each.
fn hundred_files(p: &Path) {
    for i in 0..100 {
        let body: String = (1..=9).map(|l| format!("file {i} line {l}\n")).collect();
        write(p, &format!("f/{i:02}.txt"), body.as_bytes());
    }
    git_init(p);
    git_commit_all(p);
}

/// Every file under the root's layer store but the holder records, with its size.
fn layer_files(root: &Path) -> Vec<(String, u64)> {
    let store = root.join("lowers");
    let mut v: Vec<(String, u64)> = walkdir::WalkDir::new(&store)
        .into_iter()
        .flatten()
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(&store)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, e.metadata().unwrap().len())
        })
        .filter(|(rel, _)| !rel.contains("/holders/"))
        .collect();
    v.sort();
    v
}

/// A plan's `overlay` sandbox over `original`, in the mode the environment gives (this
/// binary's other tests run meanwhile: it is never changed here); the mode it got.
fn plan_create(
    mgr: &patchbox::plan::PlanManager,
    plan: &str,
    original: &Path,
) -> (std::sync::Arc<dyn patchbox::plan::Sandbox>, String) {
    let sb = mgr
        .get_or_create_sandbox(plan, "res", original, patchbox::plan::Strategy::Overlay)
        .unwrap();
    let mode = sb.context().unwrap().metadata["overlay.mode"].clone();
    (sb, mode)
}

#[test]
fn a_new_plans_overlay_sandbox_stacks_the_projects_shared_layer_and_sees_its_edits() {
    setup();
    {
        let e = common::overlay::env();
        hundred_files(&e.project);
        let mgr = patchbox::plan::PlanManager::open(&e.root).unwrap();
        let (first, mode) = plan_create(&mgr, "p1", &e.project);
        let made = layers(&e);
        assert_eq!(
            made.len(),
            1,
            "{mode}: the first plan made the project's layer"
        );
        let files = layer_files(&e.root);
        assert!(
            files.iter().any(|(p, _)| p.ends_with("tree/f/00.txt")),
            "{mode}"
        );

        // The user edits the project without committing: the next plan sees it as it is.
        write(&e.project, "f/01.txt", b"edited, not committed\n");
        fs::remove_file(e.project.join("f/02.txt")).unwrap();
        fs::set_permissions(
            e.project.join("f/03.txt"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        write(&e.project, "untracked.txt", b"new\n");
        let (second, _) = plan_create(&mgr, "p2", &e.project);
        assert_eq!(layers(&e), made, "{mode}: the same layer, no new one");
        assert_eq!(
            layer_files(&e.root),
            files,
            "{mode}: nothing new written in the store"
        );

        let view = second.get_path(Path::new("")).unwrap();
        assert_eq!(
            common::content_view(&view),
            common::content_view(&e.project),
            "{mode}: the second plan sees the project with its uncommitted edits"
        );
        let old = first.get_path(Path::new("")).unwrap();
        assert_eq!(
            fs::read(old.join("f/01.txt")).unwrap(),
            b"file 1 line 1\nfile 1 line 2\nfile 1 line 3\nfile 1 line 4\nfile 1 line 5\n\
              file 1 line 6\nfile 1 line 7\nfile 1 line 8\nfile 1 line 9\n",
            "{mode}: the first plan keeps its own point in time"
        );

        // A file the layer serves, edited in the sandbox while the user edits another line
        // of it: the commit merges the two (its pre-image is the layer's file).
        let sb_file = second.get_path(Path::new("f/10.txt")).unwrap();
        let text = fs::read_to_string(&sb_file).unwrap();
        fs::write(
            &sb_file,
            text.replace("file 10 line 1\n", "sandbox line 1\n"),
        )
        .unwrap();
        let orig = fs::read_to_string(e.project.join("f/10.txt")).unwrap();
        fs::write(
            e.project.join("f/10.txt"),
            orig.replace("file 10 line 9\n", "user line 9\n"),
        )
        .unwrap();
        second.commit(Some("merge")).unwrap();
        let merged = fs::read_to_string(e.project.join("f/10.txt")).unwrap();
        assert!(
            merged.starts_with("sandbox line 1\n") && merged.ends_with("user line 9\n"),
            "{mode}: merged 3-way: {merged:?}"
        );
        drop((first, second));

        // A copy_on_write sandbox over the layered snapshot: its copy and its rollback come
        // from both layers.
        let cow = mgr
            .get_or_create_sandbox(
                "p3",
                "res",
                &e.project,
                patchbox::plan::Strategy::CopyOnWrite,
            )
            .unwrap();
        let p = cow.get_path(Path::new("f/20.txt")).unwrap();
        let before = fs::read(&p).unwrap();
        assert_eq!(
            before,
            fs::read(e.project.join("f/20.txt")).unwrap(),
            "{mode}"
        );
        fs::write(&p, b"scratch\n").unwrap();
        cow.rollback().unwrap();
        assert_eq!(
            fs::read(&p).unwrap(),
            before,
            "{mode}: rolled back from the layer"
        );
        assert_eq!(layers(&e), made, "{mode}");
        drop(cow);
        drop(mgr);
    }
}

/// What `git ls-files --debug` in `dir` says `rel`'s index entry holds: (ctime, mtime, ino,
/// size) as text.
fn index_stat(dir: &Path, rel: &str) -> (String, String, String, String) {
    let out = git(dir, &["ls-files", "--debug", "--", rel]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |name: &str| {
        text.split_whitespace()
            .skip_while(|w| *w != name)
            .nth(1)
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .to_string()
    };
    (
        field("ctime:"),
        field("mtime:"),
        field("ino:"),
        field("size:"),
    )
}

/// The stat data the view shows for `rel` under `dir`, as [`index_stat`] prints it.
fn view_stat(dir: &Path, rel: &str) -> (String, String, String, String) {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(dir.join(rel)).unwrap();
    (
        format!("{}:{}", m.ctime(), m.ctime_nsec()),
        format!("{}:{}", m.mtime(), m.mtime_nsec()),
        m.ino().to_string(),
        m.size().to_string(),
    )
}

/// Populates the project and runs its first overlay session, which writes the shared layer;
/// the layer's directory, or `None` (with a message) where no overlay can be mounted.
fn first_session_layer(e: &Env) -> Option<std::path::PathBuf> {
    populate(&e.project);
    let first = overlay_manager(e)?;
    let s1 = first.create_sandbox("one", None).unwrap();
    first.discard_sandbox(&s1).unwrap();
    drop(first);
    Some(shared_tree(e).parent().unwrap().to_path_buf())
}

/// A later session's private index holds, for a file the shared layer serves, the stat data
/// the view shows (so git reads no file to see it clean), whether that data comes from the
/// record the layer's writer left or, that record gone, from the layer itself.
#[test]
fn the_private_index_holds_what_the_view_shows_for_the_layers_files() {
    let e = env();
    let Some(layer) = first_session_layer(&e) else {
        return;
    };
    assert!(
        layer.join("stats").is_file(),
        "the writer recorded the stat data"
    );
    for round in ["recorded", "read again"] {
        if round == "read again" {
            fs::remove_file(layer.join("stats")).unwrap();
        }
        let m = manager(&e, Isolation::Overlay);
        let o = m.create_sandbox("o", None).unwrap();
        assert!(
            !files_in(&m.session_base().join(".lower"))
                .iter()
                .any(|p| p == "a.txt"),
            "{round}: a.txt is the layer's"
        );
        assert_eq!(
            index_stat(&o.path, "a.txt"),
            view_stat(&o.path, "a.txt"),
            "{round}"
        );
        assert!(layer.join("stats").is_file(), "{round}: recorded");
        m.discard_sandbox(&o).unwrap();
    }
}

/// A later session of an unchanged project knows the layer holds its clean tracked files
/// from the layer's digest alone, without its manifest; the view it gets is still the copy,
/// path for path, and clean in git. A layer without a digest (made by an older version) is
/// matched through its manifest and given the same digest a new layer gets.
#[test]
fn an_unchanged_project_is_matched_to_its_layer_by_the_digest_alone() {
    let e = env();
    let Some(layer) = first_session_layer(&e) else {
        return;
    };
    let digest = fs::read(layer.join("digest")).expect("a new layer has a digest");
    let manifest = fs::read(layer.join("manifest")).unwrap();

    let view_is_the_copy = |round: &str| {
        let over = manager(&e, Isolation::Overlay);
        let copy = manager(&e, Isolation::Copy);
        let o = over.create_sandbox("o", None).unwrap();
        let c = copy.create_sandbox("c", None).unwrap();
        assert_eq!(
            layers(&e),
            [layer.file_name().unwrap().to_string_lossy().into_owned()],
            "{round}: the layer was reused, not replaced"
        );
        assert_eq!(
            fingerprint(&o.path, false),
            fingerprint(&c.path, false),
            "{round}: the view over the layer is the copy"
        );
        let st = git(&o.path, &["status", "--porcelain", "--untracked-files=no"]);
        assert_eq!(String::from_utf8_lossy(&st.stdout), "", "{round}");
        write(&o.path, "a.txt", b"alpha, edited\n");
        write(&c.path, "a.txt", b"alpha, edited\n");
        let po = over.finalize_sandbox(&o).unwrap().patch;
        let pc = copy.finalize_sandbox(&c).unwrap().patch;
        assert_eq!(String::from_utf8_lossy(&po), String::from_utf8_lossy(&pc));
        over.discard_sandbox(&o).unwrap();
        copy.discard_sandbox(&c).unwrap();
    };

    // The manifest made unreadable as one: only a match by the digest can still reuse the
    // layer (a failed match would make a second layer).
    fs::write(layer.join("manifest"), b"not a manifest").unwrap();
    view_is_the_copy("digest only");
    fs::write(layer.join("manifest"), &manifest).unwrap();

    fs::remove_file(layer.join("digest")).unwrap();
    view_is_the_copy("no digest");
    assert_eq!(
        fs::read(layer.join("digest")).expect("recorded again"),
        digest,
        "the digest recorded from the manifest is the one the layer was made with"
    );
}
