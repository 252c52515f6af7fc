//! [`CommitAllOptions`]: what a caller may ask of one `commit_all` beyond the plan id (the
//! provenance recorded into each result, and, with the cargo feature `fault-injection` only,
//! a failure or an abort at a position). Its own file because both the commit and the
//! parallel group commit read it.

use std::sync::Arc;

use crate::plan::error::SandboxError;
use crate::plan::sandbox::Sandbox;

/// The options of [`PlanManager::commit_all_with`](super::PlanManager::commit_all_with).
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct CommitAllOptions {
    /// Test fault (feature `fault-injection`): the commit at this position fails (as a
    /// conflict would).
    #[cfg(feature = "fault-injection")]
    pub fail_at: Option<usize>,
    /// Test fault (feature `fault-injection`): the process aborts before the commit at this
    /// position.
    #[cfg(feature = "fault-injection")]
    pub crash_before: Option<usize>,
    /// What produced the work, into each result's metadata.
    pub provenance: crate::provenance::Provenance,
}

impl CommitAllOptions {
    /// The failure injected into the commit at position `i` (`s`'s), if any; never one
    /// without the feature `fault-injection`.
    pub(super) fn injected_failure(&self, i: usize, s: &Arc<dyn Sandbox>) -> Option<SandboxError> {
        #[cfg(feature = "fault-injection")]
        if self.fail_at == Some(i) {
            return Some(crate::plan::fault::commit_failure(s.id()));
        }
        let _ = (i, s);
        None
    }

    /// Where the process is to abort (before the commit at that position); never without
    /// the feature `fault-injection`.
    pub(super) fn crash_point(&self) -> Option<usize> {
        #[cfg(feature = "fault-injection")]
        return self.crash_before;
        #[cfg(not(feature = "fault-injection"))]
        None
    }
}
