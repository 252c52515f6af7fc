//! Work split over the machine's cores.
//!
//! Each helper here falls back to the calling thread when no thread can be made: a process
//! at its thread limit still gets its answer, only later. A panic on a helper thread is
//! resumed on the caller's, as if the work had run there. Nothing here knows what the work
//! is; it imports nothing of the crate.

/// How many cores this process may use (1 when the system does not say).
pub fn count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How many threads to give `jobs` jobs that wait on the disk as much as they use a CPU
/// (creating files, reading and compressing many small ones): twice the cores, so that some
/// compute while others wait (on a 2-core machine, 4 threads copied 5-20% faster than 2, and
/// 8 were no better than 4); at most `max`; and no more than one per `per_thread` jobs, so
/// that a handful of jobs pays for no threads. Never 0.
///
/// ```
/// assert_eq!(patchbox::cores::io_threads(10, 64, 8), 1);
/// assert!(patchbox::cores::io_threads(100_000, 64, 8) <= 8);
/// assert_eq!(patchbox::cores::io_threads(0, 1, 16), 1);
/// ```
pub fn io_threads(jobs: usize, per_thread: usize, max: usize) -> usize {
    (count() * 2)
        .clamp(1, max.max(1))
        .min(jobs.div_ceil(per_thread.max(1)).max(1))
}

/// Runs `there` on a second thread while `here` runs on this one, and returns both results
/// (`there`'s first). Without a second thread, `here` runs, then `there`, both here.
///
/// ```
/// let data = vec![1u64, 2, 3];
/// let (sum, len) = patchbox::cores::beside(|| data.iter().sum::<u64>(), || data.len());
/// assert_eq!((sum, len), (6, 3));
/// ```
pub fn beside<A: Send, B>(there: impl Fn() -> A + Sync, here: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new().spawn_scoped(s, &there);
        let b = here();
        let a = match spawned {
            Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            Err(_) => there(),
        };
        (a, b)
    })
}

/// `f` over `items`, in order, the items split into one run per core (at most four) when
/// there are enough of them (`min_items`) to pay for the threads. The first run is done on
/// this thread, into the list returned, which the others' results are appended to: the
/// results are moved once, not gathered per run and then copied whole. A run whose thread
/// cannot be made is done on this one.
///
/// ```
/// let squares = patchbox::cores::parallel_map(&[1, 2, 3], 1, |x| x * x);
/// assert_eq!(squares, [1, 4, 9]);
/// ```
pub fn parallel_map<T: Sync, U: Send>(
    items: &[T],
    min_items: usize,
    f: impl Fn(&T) -> U + Sync,
) -> Vec<U> {
    let threads = count().min(4);
    if threads < 2 || items.len() < min_items.max(2) {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let (first, rest) = items.split_at(chunk.min(items.len()));
    std::thread::scope(|s| {
        let f = &f;
        let parts: Vec<_> = rest
            .chunks(chunk)
            .map(|c| {
                let run = move || c.iter().map(f).collect::<Vec<U>>();
                std::thread::Builder::new()
                    .spawn_scoped(s, run)
                    .map_err(|_| c)
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        out.extend(first.iter().map(f));
        for p in parts {
            match p {
                Ok(h) => out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
                Err(c) => out.extend(c.iter().map(f)),
            }
        }
        out
    })
}

/// Runs `worker` on up to `threads` threads, this one among them, and returns what each
/// run returned (this thread's last). A thread that cannot be made is simply not there: the
/// runs that are share the work, and this thread's run alone must be able to do all of it
/// (workers that take their jobs from one shared queue until it is empty, as the walks and
/// the copies do). A panic on a helper thread is resumed on this one once all have ended.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let next = AtomicUsize::new(0);
/// let done: Vec<usize> = patchbox::cores::workers(3, || {
///     let mut mine = 0;
///     while next.fetch_add(1, Ordering::Relaxed) < 100 {
///         mine += 1;
///     }
///     mine
/// });
/// assert!(!done.is_empty() && done.len() <= 3);
/// assert_eq!(done.iter().sum::<usize>(), 100);
/// ```
pub fn workers<R: Send>(threads: usize, worker: impl Fn() -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let worker = &worker;
        let mut helpers = Vec::with_capacity(threads.saturating_sub(1));
        for _ in 1..threads {
            match std::thread::Builder::new().spawn_scoped(s, worker) {
                Ok(h) => helpers.push(h),
                Err(_) => break,
            }
        }
        let mine = worker();
        let mut out = Vec::with_capacity(helpers.len() + 1);
        let mut panicked = None;
        for h in helpers {
            match h.join() {
                Ok(r) => out.push(r),
                Err(p) => {
                    panicked.get_or_insert(p);
                }
            }
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
        out.push(mine);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_map_keeps_the_order_of_many_items() {
        let items: Vec<u32> = (0..10_000).collect();
        let got = parallel_map(&items, 16, |x| x * 2);
        assert_eq!(got, items.iter().map(|x| x * 2).collect::<Vec<_>>());
    }

    #[test]
    fn beside_returns_both_and_resumes_a_panic() {
        assert_eq!(beside(|| 1, || 2), (1, 2));
        let r = std::panic::catch_unwind(|| beside(|| panic!("there"), || 2));
        assert!(r.is_err());
    }

    #[test]
    fn workers_share_one_queue_and_resume_a_panic() {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let runs = workers(4, || {
            let mut mine = Vec::new();
            loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if k >= 1000 {
                    return mine;
                }
                mine.push(k);
            }
        });
        assert!(!runs.is_empty() && runs.len() <= 4);
        let mut all: Vec<usize> = runs.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
        let only = workers(1, || 7);
        assert_eq!(only, [7]);
        let r = std::panic::catch_unwind(|| {
            let first = std::sync::atomic::AtomicBool::new(true);
            workers(2, || {
                if !first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("the second run");
                }
            })
        });
        assert!(r.is_err());
    }
}
