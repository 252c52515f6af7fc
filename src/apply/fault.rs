//! Test faults of the write phase, behind the cargo feature `fault-injection`: the phase
//! fails (and rolls back) after its n-th file system step, or stops dead after it as a
//! kill -9 would, leaving the journal for [`recover_project`](super::recover_project).
//!
//! Without the feature a [`Fault`] is empty and [`Fault::after_step`] always lets the write
//! go on, so the library, the CLI and the C++ and Python faces carry no failure hook.

use super::report::ApplyOptions;
use crate::error::Result;
use std::cell::Cell;

/// The faults one write phase injects (none without the feature).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Fault {
    /// Fail after this many steps; the transaction rolls back.
    #[cfg(feature = "fault-injection")]
    fail_after: Option<usize>,
    /// Stop dead after this many steps; nothing is rolled back.
    #[cfg(feature = "fault-injection")]
    crash_after: Option<usize>,
}

impl Fault {
    /// The faults `opts` asks for ([`ApplyOptions::fail_after_steps`] and
    /// [`ApplyOptions::crash_after_steps`] with the feature; none without).
    pub(crate) fn from_options(opts: &ApplyOptions) -> Fault {
        #[cfg(feature = "fault-injection")]
        return Fault {
            fail_after: opts.fail_after_steps,
            crash_after: opts.crash_after_steps,
        };
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = opts;
            Fault::default()
        }
    }

    /// Called once `steps` steps are done: the injected error, if this is where the phase
    /// fails; `crashed` is set when the phase is to stop dead rather than roll back.
    pub(crate) fn after_step(&self, steps: usize, crashed: &Cell<bool>) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        {
            use crate::error::Error;
            if self.crash_after.is_some_and(|n| steps >= n) {
                crashed.set(true);
                return Err(Error::ApplyFailed(format!(
                    "injected crash after {steps} steps"
                )));
            }
            if self.fail_after.is_some_and(|n| steps >= n) {
                return Err(Error::ApplyFailed(format!(
                    "injected failure after {steps} steps"
                )));
            }
        }
        let _ = (steps, crashed);
        Ok(())
    }
}
