//! Times `overlay` creates with a prepared lower, one at a time (for profiling):
//! `plan_probe ORIGINAL ROOT N [EDITS]`; with `EDITS`, also times the diff of a sandbox
//! with that many edited files (every k-th file of the snapshot).
use std::time::Instant;

use patchbox::plan::{PlanManager, Strategy};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (orig, root, n) = (&a[1], &a[2], a[3].parse::<usize>().unwrap_or(10));
    let mgr = PlanManager::open(root).expect("open");
    mgr.prepare_snapshot(orig).expect("prepare");
    let mut v = Vec::new();
    let mut cpu = Vec::new();
    for i in 0..n {
        let c = thread_cpu_ms();
        let t = Instant::now();
        let sb = mgr
            .get_or_create_sandbox(&format!("p{i}"), "r", orig, Strategy::Overlay)
            .expect("create");
        v.push(t.elapsed().as_secs_f64() * 1000.0);
        cpu.push(thread_cpu_ms() - c);
        drop(sb);
    }
    if let Some(edits) = a.get(4).and_then(|e| e.parse::<usize>().ok()) {
        let info = mgr.snapshots().pop().expect("snapshot");
        let sb = mgr
            .get_or_create_sandbox("d", "r", orig, Strategy::Overlay)
            .expect("create");
        let root = sb.get_path("".as_ref()).expect("path");
        let files: Vec<_> = walk(&info.path);
        let step = (files.len() / edits).max(1);
        let mut k = 0;
        for f in files.iter().step_by(step).take(edits) {
            let rel = f.strip_prefix(&info.path).expect("below");
            let p = root.join(rel);
            let mut d = std::fs::read(&p).expect("read");
            d.extend_from_slice(b"/* edited */\n");
            std::fs::write(&p, d).expect("write");
            k += 1;
        }
        let mut t = Vec::new();
        for _ in 0..5 {
            let s = Instant::now();
            let d = sb.diff().expect("diff");
            t.push(s.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(d.entries.len(), k);
        }
        t.sort_by(|a, b| a.total_cmp(b));
        println!(
            "overlay diff of {k} edits ms: min {:.2} median {:.2}",
            t[0], t[2]
        );
        drop(sb);
        mgr.cleanup_all("d").expect("cleanup");
    }
    for i in 0..n {
        mgr.cleanup_all(&format!("p{i}")).expect("cleanup");
    }
    v.sort_by(|a, b| a.total_cmp(b));
    cpu.sort_by(|a, b| a.total_cmp(b));
    println!(
        "overlay create ms: wall min {:.2} median {:.2} max {:.2}; CPU (user+sys) median {:.2}",
        v[0],
        v[n / 2],
        v[n - 1],
        cpu[n / 2]
    );
}

/// This thread's CPU time (user + system), in ms.
fn thread_cpu_ms() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}
