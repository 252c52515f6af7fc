//! Plan checkpoints in an object store: taken on one machine (root, project copy), restored
//! into another machine's sandbox, deleted with what nothing references any more — against
//! a real S3-compatible server (SeaweedFS's `weed server -s3`; skipped with a message when
//! the binary is absent) and against a directory store.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::weed::Weed;
use common::write;
use patchbox::plan::checkpoint::{CheckpointManager, Phase};
use patchbox::plan::{PlanManager, Sandbox, Strategy};
use patchbox::store::{DirObjects, Key, Objects};

fn project(dir: &Path) -> PathBuf {
    for i in 0..30 {
        write(
            dir,
            &format!("src/f{i}.txt"),
            format!("file {i}\n").as_bytes(),
        );
    }
    write(dir, "big.bin", &vec![7u8; 100_000]);
    dir.to_path_buf()
}

/// Every file under the sandbox: path → (mode, content).
fn files(sb: &Arc<dyn Sandbox>) -> BTreeMap<String, (u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let root = sb.get_path(Path::new("")).unwrap();
    walkdir::WalkDir::new(&root)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| {
            e.file_type().is_file() && !e.path().components().any(|c| c.as_os_str() == ".git")
        })
        .map(|e| {
            let rel = e.path().strip_prefix(&root).unwrap().display().to_string();
            let mode = e.metadata().unwrap().permissions().mode() & 0o777;
            (rel, (mode, fs::read(e.path()).unwrap()))
        })
        .collect()
}

/// The scenario, on any store: machine A checkpoints, machine B restores, then deletes.
fn across_roots(objects: Arc<dyn Objects>) {
    let tmp = tempfile::tempdir().unwrap();
    let a_project = project(&tmp.path().join("a/project"));
    let b_project = project(&tmp.path().join("b/project"));

    // Machine A: a sandbox edited, then checkpointed into the store.
    let a_root = tmp.path().join("a/root");
    let a_plans = PlanManager::open(&a_root).unwrap();
    let a_sb = a_plans
        .get_or_create_sandbox("plan", "r", &a_project, Strategy::CopyOnWrite)
        .unwrap();
    let at = |rel: &str| a_sb.get_path(Path::new(rel)).unwrap();
    fs::write(at("src/f3.txt"), "changed\n").unwrap();
    fs::remove_file(at("src/f4.txt")).unwrap();
    fs::write(at("new.txt"), "new\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(at("src/f5.txt"), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let a_ckpts = CheckpointManager::with_objects(&a_root, objects.clone());
    let first = a_ckpts
        .create_checkpoint(&a_sb, "plan", Phase::PostExecute.name(), Default::default())
        .unwrap();
    // A second checkpoint sharing the same content adds a manifest, not the objects again.
    let before = objects
        .list(&Key::new("checkpoints/objects").unwrap())
        .unwrap()
        .len();
    fs::write(at("src/f6.txt"), "changed\n").unwrap(); // same content as f3: shared
    let second = a_ckpts
        .create_checkpoint(&a_sb, "plan", Phase::PreApply.name(), Default::default())
        .unwrap();
    let after = objects
        .list(&Key::new("checkpoints/objects").unwrap())
        .unwrap()
        .len();
    assert_eq!(before, after, "identical content is stored once");
    let want = files(&a_sb);
    drop(a_ckpts); // the local copies go; the stored ones stay
    drop(a_plans);

    // Machine B: its own root and copy of the project, restored from the store.
    let b_root = tmp.path().join("b/root");
    let b_plans = PlanManager::open(&b_root).unwrap();
    let b_sb = b_plans
        .get_or_create_sandbox("plan", "r", &b_project, Strategy::CopyOnWrite)
        .unwrap();
    let b_ckpts = CheckpointManager::with_objects(&b_root, objects.clone());
    let stored: Vec<String> = b_ckpts
        .list_stored()
        .unwrap()
        .into_iter()
        .map(|c| c.checkpoint_id)
        .collect();
    assert_eq!(
        stored,
        vec![first.checkpoint_id.clone(), second.checkpoint_id.clone()]
    );
    assert_ne!(files(&b_sb), want);
    let restored = b_ckpts
        .restore_from_store(&b_sb, &second.checkpoint_id)
        .unwrap()
        .expect("the store has it");
    assert_eq!(files(&b_sb), want);
    // Kept locally too: rolling back to it needs no store.
    fs::write(b_sb.get_path(Path::new("src/f3.txt")).unwrap(), "later\n").unwrap();
    assert!(b_ckpts.rollback_to(&restored).unwrap());
    assert_eq!(files(&b_sb), want);
    // The first checkpoint, restored over the second, drops f6's change again.
    b_ckpts
        .restore_from_store(&b_sb, &first.checkpoint_id)
        .unwrap()
        .unwrap();
    assert_eq!(
        fs::read_to_string(b_sb.get_path(Path::new("src/f6.txt")).unwrap()).unwrap(),
        "file 6\n"
    );

    // Deleting both removes them from the store; prune takes the objects nothing uses.
    assert!(b_ckpts.delete_checkpoint(&first.checkpoint_id).unwrap());
    assert!(b_ckpts.delete_checkpoint(&second.checkpoint_id).unwrap());
    assert!(b_ckpts.list_stored().unwrap().is_empty());
    assert!(b_ckpts
        .restore_from_store(&b_sb, &first.checkpoint_id)
        .unwrap()
        .is_none());
    b_ckpts.prune_store(std::time::Duration::ZERO).unwrap();
    assert!(objects
        .list(&Key::new("checkpoints").unwrap())
        .unwrap()
        .is_empty());
}

#[test]
fn checkpoints_in_a_directory_store_restore_across_roots() {
    let tmp = tempfile::tempdir().unwrap();
    across_roots(Arc::new(DirObjects::new(tmp.path().join("store"))));
}

#[test]
fn checkpoints_in_an_s3_bucket_restore_across_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut weed) = Weed::start(&tmp.path().join("weed"), "checkpoints_s3") else {
        return;
    };
    weed.create_bucket("ckpt");
    across_roots(Arc::new(weed.objects("ckpt", "plans")));
}
