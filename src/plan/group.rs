//! The sandboxes of a `commit_all` that commit together: their intents made durable by one
//! sync, their originals changed one sandbox at a time, in the plan's order.
//!
//! An apply makes its intent durable (a `syncfs`) before it moves any original, so that a
//! crash in the middle is recovered. Done one sandbox after the other, a `commit_all` of n
//! sandboxes pays n of those syncs, and stages every sandbox's new contents on one core. A
//! [`CommitGroup`] runs the members' commits on their own threads: each stages its new
//! contents, writes its undo record and its intent, then waits
//! (`SharedSync::intent_written`); when every member has written its intent or has
//! failed before, one `syncfs` per filesystem makes all the intents durable. Then the
//! members move their originals **one at a time, in the plan's order**, so the outcome is
//! the sequential one: when member i fails, the members before it are committed (and
//! `commit_all` rolls them back in LIFO order), the members after it are refused before
//! touching anything (their transactions roll back; their originals were never touched).
//! A member passes the turn as soon as its change is in place (`placed`), and writes its
//! sandbox's state while the next one moves. Should that write fail, the member is still
//! committed (`Lifecycle::advance_committed`), the one after it may have moved too, and
//! `commit_all` rolls back every committed one: all or nothing, as before.
//!
//! Members must have pairwise disjoint originals (no original inside another): each holds
//! its project's lock from its staging to the end of the `commit_all`.
//!
//! ```text
//! member 0: stage ─ intent ┐               move ─ state
//! member 1: stage ─ intent ┤                     move ─ state
//! member 2: stage ─ intent ┘─ one syncfs ─                   move ─ state
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::apply::{IntentHook, SharedSync};
use crate::error::{Error, Result};

/// The members' progress (see the module docs).
struct State {
    /// Members whose intent is written (and who wait), or whose commit has returned.
    accounted: usize,
    /// Per member: its intent is written.
    arrived: Vec<bool>,
    /// The projects of the intents written.
    roots: Vec<PathBuf>,
    /// Per member: `Some(ok)` once its commit returned.
    outcome: Vec<Option<bool>>,
    /// Per member: its change is in place (its commit may still be finishing).
    placed: Vec<bool>,
    /// The shared sync's outcome, once done.
    synced: Option<std::result::Result<(), String>>,
    /// The member that may move its originals now.
    turn: usize,
    /// Set once a member failed: the members after it must not move anything.
    refused: Option<String>,
    /// Test fault (feature `fault-injection`): the process aborts when this member's turn
    /// comes.
    #[cfg(feature = "fault-injection")]
    crash_at: Option<usize>,
}

/// Members of one `commit_all` sharing their intent sync (see the module docs).
pub struct CommitGroup {
    members: usize,
    state: Mutex<State>,
    cv: Condvar,
}

impl CommitGroup {
    /// A group of `members` members. `crash_at` (a test fault, acted on only with the
    /// feature `fault-injection`) aborts the process when that member's turn to move its
    /// originals comes.
    pub fn new(members: usize, crash_at: Option<usize>) -> Arc<CommitGroup> {
        let g = Arc::new(CommitGroup {
            members,
            state: Mutex::new(State {
                accounted: 0,
                arrived: vec![false; members],
                roots: Vec::new(),
                outcome: vec![None; members],
                placed: vec![false; members],
                synced: None,
                turn: 0,
                refused: None,
                #[cfg(feature = "fault-injection")]
                crash_at,
            }),
            cv: Condvar::new(),
        });
        #[cfg(feature = "fault-injection")]
        if crash_at == Some(0) {
            std::process::abort();
        }
        #[cfg(not(feature = "fault-injection"))]
        let _ = crash_at;
        g
    }

    /// The hook member `index` hands to its apply.
    pub(crate) fn hook(self: &Arc<Self>, index: usize) -> IntentHook {
        IntentHook(Arc::new(Member {
            group: Arc::clone(self),
            index,
        }))
    }

    /// Member `index`'s commit returned (`ok`: it succeeded, whether or not it wrote).
    /// Must be called exactly once per member, whatever happened.
    pub fn done(&self, index: usize, ok: bool) {
        let mut st = self.lock();
        if st.outcome[index].is_some() {
            return;
        }
        st.outcome[index] = Some(ok);
        if !st.arrived[index] {
            st.accounted += 1;
        }
        if !ok && index < st.turn && st.refused.is_none() {
            // Failed after its change was placed and the turn had passed it: the members
            // not yet moving are refused now (those moving go on; `commit_all` rolls back
            // every committed one).
            st.refused = Some(format!(
                "refused: the commit at position {index} of the plan failed"
            ));
        }
        self.sync_when_all(&mut st);
        self.pass_turn(&mut st);
        self.cv.notify_all();
    }

    /// Member `index`'s change is in place: the turn may pass it before its commit returns.
    fn placed(&self, index: usize) {
        let mut st = self.lock();
        st.placed[index] = true;
        self.pass_turn(&mut st);
        self.cv.notify_all();
    }

    /// Passes the turn over every member whose change is placed or whose commit has
    /// returned, in order.
    fn pass_turn(&self, st: &mut State) {
        while st.turn < self.members {
            match st.outcome[st.turn] {
                Some(false) if st.refused.is_none() => {
                    st.refused = Some(format!(
                        "refused: the commit at position {} of the plan failed",
                        st.turn
                    ));
                }
                Some(_) => {}
                None if st.placed[st.turn] => {}
                None => break,
            }
            st.turn += 1;
            #[cfg(feature = "fault-injection")]
            if st.crash_at == Some(st.turn) {
                std::process::abort();
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A member that panicked while holding the lock left nothing half-updated that
        // matters more than going on: each field is set in one step.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Once every member is accounted for, syncs each filesystem of the written intents
    /// once (the caller holds the lock; everyone else is waiting for this anyway).
    fn sync_when_all(&self, st: &mut State) {
        if st.synced.is_some() || st.accounted < self.members {
            return;
        }
        st.synced = Some(sync_each_fs(&st.roots).map_err(|e| e.to_string()));
        self.cv.notify_all();
    }

    fn intent_written(&self, index: usize, root: &Path) -> Result<()> {
        let mut st = self.lock();
        if !st.arrived[index] {
            st.arrived[index] = true;
            st.accounted += 1;
            st.roots.push(root.to_path_buf());
        }
        loop {
            self.sync_when_all(&mut st);
            match &st.synced {
                Some(Err(e)) => {
                    return Err(Error::ApplyFailed(format!(
                        "the intents of the plan's commits could not be made durable: {e}"
                    )))
                }
                Some(Ok(())) => {
                    if let Some(why) = &st.refused {
                        return Err(Error::ApplyFailed(why.clone()));
                    }
                    if st.turn == index {
                        return Ok(());
                    }
                }
                None => {}
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// One member's view of its group, handed to its apply's write phase.
struct Member {
    group: Arc<CommitGroup>,
    index: usize,
}

impl SharedSync for Member {
    fn intent_written(&self, root: &Path) -> Result<()> {
        self.group.intent_written(self.index, root)
    }

    fn placed(&self) {
        self.group.placed(self.index);
    }
}

/// `syncfs` of each filesystem holding one of `roots`, once.
fn sync_each_fs(roots: &[PathBuf]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut done: Vec<u64> = Vec::new();
    for root in roots {
        let dev = std::fs::metadata(root)
            .map_err(|e| Error::io("inspect", root, e))?
            .dev();
        if !done.contains(&dev) {
            crate::fs::project::sync_fs(root)?;
            done.push(dev);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A placed member passes the turn before its commit returns; its failure afterwards
    /// refuses the members still waiting.
    #[test]
    fn a_placed_member_passes_the_turn_and_its_later_failure_refuses_the_waiting() {
        let d = tempfile::tempdir().unwrap();
        let g = CommitGroup::new(3, None);
        let (m0, m1) = (g.hook(0), g.hook(1));
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let h0 = s.spawn(|| m0.0.intent_written(d.path()));
            let h1 = s.spawn(|| m1.0.intent_written(d.path()));
            // Member 2 fails before its intent: the sync can happen.
            g.done(2, false);
            let r0 = h0.join().unwrap();
            assert!(r0.is_ok());
            // Member 0 placed: member 1 gets its turn while 0 is still finishing.
            m0.0.placed();
            let r1 = h1.join().unwrap();
            g.done(1, r1.is_ok());
            g.done(0, true);
            vec![r0, r1]
        });
        assert!(results.iter().all(|r| r.is_ok()));

        // Placed, then failed: the member already moving goes on, the one still waiting is
        // refused.
        let g = CommitGroup::new(3, None);
        let (m0, m1, m2) = (g.hook(0), g.hook(1), g.hook(2));
        std::thread::scope(|s| {
            let h1 = s.spawn(|| m1.0.intent_written(d.path()));
            let h2 = s.spawn(|| m2.0.intent_written(d.path()));
            assert!(m0.0.intent_written(d.path()).is_ok());
            m0.0.placed();
            assert!(h1.join().unwrap().is_ok(), "member 1's turn came");
            // Member 0's state could not be written after all.
            g.done(0, false);
            let e = h2.join().unwrap().unwrap_err().to_string();
            assert!(e.contains("position 0"), "{e}");
            g.done(1, true);
            g.done(2, false);
        });
    }

    /// Members move in order, after one sync; a failure refuses the ones after it.
    #[test]
    fn turns_follow_the_order_and_a_failure_refuses_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let g = CommitGroup::new(4, None);
        let order = Mutex::new(Vec::new());
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .rev()
                .map(|i| {
                    let (g, order, root) = (&g, &order, d.path());
                    s.spawn(move || {
                        if i == 2 {
                            // Fails before writing its intent.
                            g.done(i, false);
                            return Err(Error::ApplyFailed("staging failed".into()));
                        }
                        let r = g.hook(i).0.intent_written(root);
                        if r.is_ok() {
                            order.lock().unwrap().push(i);
                        }
                        g.done(i, r.is_ok());
                        r
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).rev().collect()
        });
        assert_eq!(*order.lock().unwrap(), vec![0, 1]);
        assert!(results[0].is_ok() && results[1].is_ok());
        let refused = results[3].as_ref().unwrap_err().to_string();
        assert!(refused.contains("position 2"), "{refused}");
    }
}
