//! `copy_on_write` on Btrfs: `tree/` is a subvolume and the sandbox learns its changes from
//! the filesystem's change record (transaction ids) instead of a walk. A long-lived handle
//! that follows the record must report exactly what a fresh handle, which walks, reports,
//! after every kind of edit: writes, same-size rewrites, modes, symlinks, hard links,
//! renames of files and directories (moved in, moved out, swapped), trees removed, files
//! becoming directories and back, and nested `.git` directories. Checkpoints and
//! rollbacks over the record restore exactly. Needs root (mount, tree search); skipped
//! otherwise.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{mode_view, write, Rng};
use patchbox::plan::checkpoint::CheckpointManager;
use patchbox::plan::{PlanManager, Sandbox, Strategy};

/// A project of `n` files in nested directories on `fs`.
fn project(fs_root: &Path, n: usize) -> PathBuf {
    let p = fs_root.join("project");
    for i in 0..n {
        write(
            &p,
            &format!("d{}/s{}/f{i}.txt", i % 5, i % 3),
            format!("file {i}\n").as_bytes(),
        );
    }
    p
}

/// One random edit under the sandbox's root `t`.
fn edit(t: &Path, rng: &mut Rng, n: usize) {
    let i = rng.below(n as u64) as usize;
    let f = t.join(format!("d{}/s{}/f{i}.txt", i % 5, i % 3));
    let d = t.join(format!("d{}", rng.below(5)));
    let other = t.join(format!("d{}", rng.below(5)));
    let is_file = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    match rng.below(13) {
        0 => {
            let _ = fs::write(&f, format!("edited {}\n", rng.below(1000)));
        }
        // The same size, written twice in a row: a timestamp may not move.
        1 => {
            if let Ok(len) = fs::metadata(&f).map(|m| m.len()) {
                let _ = fs::write(&f, vec![b'a'; len as usize]);
                let _ = fs::write(&f, vec![b'b'; len as usize]);
            }
        }
        2 => {
            let _ = fs::remove_file(&f);
        }
        3 => {
            if is_file(&f) {
                let mode = if rng.below(2) == 0 { 0o755 } else { 0o644 };
                fs::set_permissions(&f, fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        4 => {
            if is_file(&f) {
                fs::remove_file(&f).unwrap();
                std::os::unix::fs::symlink(format!("f{}.txt", rng.below(n as u64)), &f).unwrap();
            }
        }
        5 => {
            if is_file(&f) {
                let link = t.join(format!("hard{}", rng.below(4)));
                let _ = fs::remove_file(&link);
                fs::hard_link(&f, &link).unwrap();
            }
        }
        // A file renamed into another directory.
        6 => {
            if is_file(&f) && d.is_dir() {
                let _ = fs::rename(&f, d.join(format!("moved{}", rng.below(50))));
            }
        }
        // A directory renamed, swapped with another, or moved down.
        7 => {
            if d.is_dir() && other.is_dir() && d != other {
                let tmp = t.join("swap-tmp");
                fs::rename(&d, &tmp).unwrap();
                fs::rename(&other, &d).unwrap();
                fs::rename(&tmp, &other).unwrap();
            }
        }
        8 => {
            if d.is_dir() && other.is_dir() && d != other {
                let _ = fs::rename(&d, other.join(format!("sub{}", rng.below(3))));
            }
        }
        9 => {
            if d.is_dir() {
                let _ = fs::rename(&d, t.join(format!("renamed{}", rng.below(3))));
            }
        }
        10 => {
            if is_file(&f) {
                fs::remove_file(&f).unwrap();
                fs::create_dir(&f).unwrap();
                fs::write(f.join("inside"), "x\n").unwrap();
            } else if f.is_dir() {
                fs::remove_dir_all(&f).unwrap();
                fs::write(&f, "back\n").unwrap();
            }
        }
        11 => {
            let _ = fs::remove_dir_all(&d);
            if rng.below(2) == 0 {
                write(t, &format!("d{}/fresh/new.txt", rng.below(5)), b"fresh\n");
            }
        }
        _ => {
            // A repository inside the sandbox: its `.git` is never listed.
            write(t, &format!("d{}/inner/.git/HEAD", rng.below(5)), b"ref\n");
            write(
                t,
                &format!("d{}/inner/code.rs", rng.below(5)),
                b"fn x() {}\n",
            );
        }
    }
}

/// Files and symlinks with their mode and content: checkpoints record no directories and
/// nothing inside a `.git` directory.
fn files_view(t: &Path) -> common::ModeView {
    let mut v = mode_view(t);
    v.retain(|k, (kind, _, _)| *kind != 'd' && !k.split(|&b| b == b'/').any(|c| c == b".git"));
    v
}

/// The sandbox `r` of plan `p` as a fresh handle sees it: its first diff walks.
fn walked(root: &Path) -> patchbox::plan::SandboxDiff {
    walked_of(root, "r")
}

/// The sandbox `resource` of plan `p` as a fresh handle sees it.
fn walked_of(root: &Path, resource: &str) -> patchbox::plan::SandboxDiff {
    let plans = PlanManager::open(root).unwrap();
    plans.set_cleanup_on_drop(false);
    let sb = plans
        .get_sandbox("p", resource)
        .expect("the sandbox is there");
    sb.diff().unwrap()
}

/// `tree` (a sandbox's, named `label`) is a subvolume, a snapshot of another (the layer),
/// holding exactly the files and the directories of `project`, `.git` left out.
fn assert_a_snapshot_of(tree: &Path, project: &Path, label: &str) {
    assert_eq!(
        fs::metadata(tree).unwrap().ino(),
        256,
        "{label}: tree/ is a subvolume"
    );
    assert_ne!(
        is_snapshot(tree),
        Some(false),
        "{label}: tree/ is a snapshot"
    );
    let mut want = files_view(project);
    want.retain(|k, _| !k.starts_with(b".git"));
    assert_eq!(
        files_view(tree),
        want,
        "{label}: the sandbox is the project"
    );
    assert_eq!(
        dirs_of(tree),
        dirs_of(project),
        "{label}: the sandbox has the project's directories, no more"
    );
}

/// The directories below `root`, `.git` left out.
fn dirs_of(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_dir())
        .map(|e| e.path().strip_prefix(root).unwrap().to_path_buf())
        .collect();
    v.sort();
    v
}

/// Whether the subvolume at `p` is a snapshot of another (`btrfs subvolume show` names a
/// parent); `None` without the `btrfs` tool.
fn is_snapshot(p: &Path) -> Option<bool> {
    let o = std::process::Command::new("btrfs")
        .args(["subvolume", "show"])
        .arg(p)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let parent = text
        .lines()
        .find(|l| l.trim_start().starts_with("Parent UUID:"))?
        .split(':')
        .nth(1)?
        .trim()
        .to_string();
    Some(parent != "-")
}

fn setup(fs_root: &Path, n: usize) -> (PathBuf, PlanManager, Arc<dyn Sandbox>, PathBuf) {
    let project = project(fs_root, n);
    let root = fs_root.join("plans");
    let plans = PlanManager::open(&root).unwrap();
    let sb = plans
        .get_or_create_sandbox("p", "r", &project, Strategy::CopyOnWrite)
        .unwrap();
    let tree = sb.get_path(Path::new("")).unwrap();
    // The sandbox is a subvolume's root: that is what gives it the record.
    assert_eq!(
        fs::metadata(&tree).unwrap().ino(),
        256,
        "tree/ is a subvolume"
    );
    // A snapshot of the plan's own snapshot of the project, not a copy.
    assert_ne!(is_snapshot(&tree), Some(false), "tree/ is a snapshot");
    (root, plans, sb, tree)
}

#[test]
fn the_record_reports_what_a_walk_reports_after_every_kind_of_edit() {
    let Some(btrfs) = common::btrfs::mount() else {
        return;
    };
    let n = 60;
    let (root, _plans, sb, tree) = setup(btrfs.path(), n);
    let mut rng = Rng::new("btrfs record vs walk");
    assert!(sb.diff().unwrap().entries.is_empty());
    for round in 0..40 {
        for _ in 0..=rng.below(6) {
            edit(&tree, &mut rng, n);
        }
        let followed = sb.diff().unwrap();
        let fresh = walked(&root);
        assert_eq!(
            followed.entries, fresh.entries,
            "round {round}: the record and a walk disagree"
        );
        assert_eq!(followed.patch, fresh.patch, "round {round}");
    }
    // And an unchanged sandbox stays unchanged, look after look.
    let a = sb.diff().unwrap();
    assert_eq!(a, sb.diff().unwrap());
}

#[test]
fn checkpoints_over_the_record_restore_exactly() {
    let Some(btrfs) = common::btrfs::mount() else {
        return;
    };
    let n = 40;
    let (root, _plans, sb, tree) = setup(btrfs.path(), n);
    let cm = CheckpointManager::new(&root);
    let mut rng = Rng::new("btrfs record checkpoints");
    let mut taken = Vec::new();
    for _ in 0..8 {
        for _ in 0..=rng.below(5) {
            edit(&tree, &mut rng, n);
        }
        let c = cm
            .create_checkpoint(&sb, "p", "post_execute", Default::default())
            .unwrap();
        taken.push((c, files_view(&tree)));
    }
    for _ in 0..8 {
        let (c, want) = &taken[rng.below(taken.len() as u64) as usize];
        edit(&tree, &mut rng, n);
        assert!(cm.rollback_to(c).unwrap());
        let now = files_view(&tree);
        let differ: Vec<String> = now
            .keys()
            .chain(want.keys())
            .filter(|k| now.get(*k) != want.get(*k))
            .map(|k| {
                format!(
                    "{}: {:?} / {:?}",
                    String::from_utf8_lossy(k),
                    now.get(k),
                    want.get(k)
                )
            })
            .collect();
        assert!(
            differ.is_empty(),
            "rollback to {}: {differ:#?}",
            c.checkpoint_id
        );
    }
}

#[test]
fn a_nested_subvolume_makes_the_sandbox_walk() {
    let Some(btrfs) = common::btrfs::mount() else {
        return;
    };
    let (root, _plans, sb, tree) = setup(btrfs.path(), 10);
    assert!(sb.diff().unwrap().entries.is_empty());
    // Writes inside a nested subvolume are in another tree, which the record does not
    // search: the sandbox must see them all the same.
    let ok = std::process::Command::new("btrfs")
        .args(["subvolume", "create"])
        .arg(tree.join("nested"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: the btrfs tool is not available");
        return;
    }
    assert_eq!(sb.diff().unwrap().entries.len(), 0);
    fs::write(tree.join("nested/a.txt"), "a\n").unwrap();
    let d = sb.diff().unwrap();
    assert_eq!(d.entries.len(), 1);
    fs::write(tree.join("nested/a.txt"), "ab\n").unwrap();
    assert_eq!(sb.diff().unwrap().entries, walked(&root).entries);
    assert_eq!(
        sb.diff().unwrap().entries[0].after.as_deref(),
        Some(&b"ab\n"[..])
    );
    fs::remove_dir_all(tree.join("nested")).unwrap();
}

/// A git project on Btrfs: the project's shared layer is a subvolume, and a
/// `copy_on_write` sandbox is a snapshot of it with the project's own changes laid over.
#[test]
fn a_sandbox_over_the_shared_layer_is_a_snapshot_holding_exactly_the_project() {
    let Some(btrfs) = common::btrfs::mount() else {
        return;
    };
    // Small projects get a shared layer too (as the shared_lower tests do).
    std::env::set_var("PATCHBOX_SHARED_LOWER_MIN", "1");
    let project = project(btrfs.path(), 50);
    write(&project, "dir/link-target.txt", b"t\n");
    std::os::unix::fs::symlink("link-target.txt", project.join("dir/link")).unwrap();
    common::git_init(&project);
    common::git_commit_all(&project);
    // The project as the user left it: edited, deleted, added, a file where a directory
    // was, and a directory where a file was.
    fs::write(project.join("d0/s0/f0.txt"), "user edit\n").unwrap();
    fs::remove_file(project.join("d1/s1/f1.txt")).unwrap();
    write(&project, "untracked/new.txt", b"new\n");
    fs::remove_dir_all(project.join("d2/s2")).unwrap();
    fs::write(project.join("d2/s2"), "now a file\n").unwrap();
    fs::remove_file(project.join("d3/s0/f3.txt")).unwrap();
    write(&project, "d3/s0/f3.txt/inside.txt", b"now a directory\n");

    let root = btrfs.path().join("plans");
    let plans = PlanManager::open(&root).unwrap();
    for resource in ["r", "r2"] {
        let sb = plans
            .get_or_create_sandbox("p", resource, &project, Strategy::CopyOnWrite)
            .unwrap();
        assert_a_snapshot_of(&sb.get_path(Path::new("")).unwrap(), &project, resource);
        assert!(
            sb.diff().unwrap().entries.is_empty(),
            "{resource}: no change yet"
        );
    }
    // The layer is a subvolume (what the sandboxes were snapshots of).
    let layers: Vec<PathBuf> = walkdir::WalkDir::new(root.join("lowers"))
        .max_depth(3)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() == "tree")
        .map(|e| e.path().to_path_buf())
        .collect();
    assert!(!layers.is_empty(), "the project has a shared layer");
    assert!(layers.iter().all(|l| fs::metadata(l).unwrap().ino() == 256));

    // Work in the sandbox reaches the project through the commit, and only that work.
    let sb = plans.get_sandbox("p", "r").unwrap();
    let tree = sb.get_path(Path::new("")).unwrap();
    fs::write(tree.join("d4/s1/f4.txt"), "sandbox edit\n").unwrap();
    fs::remove_file(tree.join("untracked/new.txt")).unwrap();
    let d = sb.diff().unwrap();
    assert_eq!(d.entries, walked_of(&root, "r").entries);
    assert_eq!(d.entries.len(), 2);
    sb.commit(None).unwrap();
    assert_eq!(
        fs::read_to_string(project.join("d4/s1/f4.txt")).unwrap(),
        "sandbox edit\n"
    );
    assert!(!project.join("untracked/new.txt").exists());
    assert_eq!(
        fs::read_to_string(project.join("d0/s0/f0.txt")).unwrap(),
        "user edit\n"
    );

    // A whole directory the layer holds, gone from the project before a new plan: the new
    // plan's sandbox, a snapshot of that layer, has no such directory either.
    fs::remove_dir_all(project.join("d1/s0")).unwrap();
    let sb = plans
        .get_or_create_sandbox("p2", "r", &project, Strategy::CopyOnWrite)
        .unwrap();
    assert_a_snapshot_of(&sb.get_path(Path::new("")).unwrap(), &project, "p2");
}

/// The sandbox's whole tree removed and made again by the agent: the record of the old
/// subvolume says nothing of the new directory, which is walked.
#[test]
fn a_tree_replaced_wholesale_is_walked() {
    let Some(btrfs) = common::btrfs::mount() else {
        return;
    };
    let (root, _plans, sb, tree) = setup(btrfs.path(), 12);
    assert!(sb.diff().unwrap().entries.is_empty());
    fs::write(tree.join("d0/s0/f0.txt"), "edited\n").unwrap();
    assert_eq!(sb.diff().unwrap().entries.len(), 1);
    fs::remove_dir_all(&tree).unwrap();
    fs::create_dir(&tree).unwrap();
    write(&tree, "only.txt", b"alone\n");
    let d = sb.diff().unwrap();
    assert_eq!(d.entries, walked(&root).entries);
    // Every file of the project is gone but one, which is new.
    assert_eq!(d.entries.len(), 13);
    write(&tree, "d0/s0/f0.txt", b"file 0\n");
    assert_eq!(sb.diff().unwrap().entries, walked(&root).entries);
    assert_eq!(sb.diff().unwrap().entries.len(), 12);
}

/// A filesystem mounted inside the sandbox: its writes are in no Btrfs tree, so the sandbox
/// walks while it is there.
#[test]
fn a_mount_inside_makes_the_sandbox_walk() {
    let Some(btrfs) = common::btrfs::mount() else {
        return;
    };
    let (root, _plans, sb, tree) = setup(btrfs.path(), 8);
    assert!(sb.diff().unwrap().entries.is_empty());
    let m = tree.join("mnt");
    fs::create_dir(&m).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "none"])
        .arg(&m)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: tmpfs cannot be mounted here");
        return;
    }
    assert!(sb.diff().unwrap().entries.is_empty());
    fs::write(m.join("inside.txt"), "on tmpfs\n").unwrap();
    let d = sb.diff().unwrap();
    let _ = std::process::Command::new("umount").arg(&m).status();
    assert_eq!(d.entries.len(), 1, "{:?}", d.entries);
    assert_eq!(d.entries[0].path, "mnt/inside.txt");
    assert!(walked(&root).entries.is_empty(), "unmounted: nothing left");
}
