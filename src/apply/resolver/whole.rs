//! The whole-patch view once every file patch is resolved: checks only the whole patch can
//! make, the outcome, and the changes the write phase must make.
//!
//! A file patch alone cannot tell whether its parents will be directories or whether a
//! directory it replaces will be empty: [`Planner::validate`] judges that over the final
//! planned state, turning a file's report into a conflict where needed. Only when the
//! outcome allows writing does the caller ask for the [`PlanOp`]s.

use super::state::VState;
use super::{PlanOp, Planner};
use crate::apply::change::Target;
use crate::apply::report::{FileStatus, Outcome};
use crate::error::Result;
use crate::fs::project::{self, Entry};
use crate::fs::relpath::{RelPath, RelPathSet};

impl Planner<'_> {
    /// Whole-patch checks once every file is resolved: parents must be directories, and a
    /// directory can only be replaced by a file if the patch empties it.
    ///
    /// Each path's parents are judged in time proportional to the path: the planned ones
    /// are found in one walk down a tree of the planned paths, and the project's in one walk
    /// down the project (below the first entry that is not a directory nothing exists).
    pub(super) fn validate(&mut self) -> Result<()> {
        let finals: Vec<RelPath> = self
            .overlay
            .iter()
            .filter(|(_, v)| matches!(v, VState::File { .. } | VState::Symlink(_)))
            .map(|(k, _)| k.clone())
            .collect();
        let mut planned = RelPathSet::new();
        for k in self.overlay.keys() {
            planned.insert(k);
        }
        let not_dir =
            |v: &VState| matches!(v, VState::File { .. } | VState::Symlink(_) | VState::Other);
        for path in finals {
            // The shallowest parent that will not be a directory.
            let mut bad: Option<usize> = None;
            let in_plan = planned.ancestors_of(&path);
            for &d in &in_plan {
                let st = path.ancestor(d).and_then(|a| self.overlay.get(&a));
                if st.is_some_and(not_dir) {
                    bad = Some(d);
                    break;
                }
            }
            let (dirs, blocker) = project::probe_parents(&self.root, &path)?;
            if blocker.is_some() {
                // Component `dirs` (0-based) is a file, symlink or special file in the
                // project; it stays one unless the patch plans something else there.
                let d = dirs + 1;
                if !in_plan.contains(&d) && bad.is_none_or(|b| d < b) {
                    bad = Some(d);
                }
            }
            let mut problem = bad
                .and_then(|d| path.ancestor(d))
                .map(|a| format!("{a} is not a directory"));
            if problem.is_none() && matches!(self.original(&path)?, Entry::Dir { .. }) {
                let pp = self.checked(&path)?;
                let leaves = project::list_leaves(&pp)?;
                let kept: Vec<&RelPath> = leaves
                    .iter()
                    .filter(|l| self.overlay.get(*l) != Some(&VState::Absent))
                    .collect();
                if !kept.is_empty() {
                    problem = Some(format!(
                        "the directory {path} is in the way (it holds {} file(s) the patch does not delete)",
                        kept.len()
                    ));
                }
            }
            if let Some(why) = problem {
                if let Some(&idx) = self.owner.get(&path) {
                    if let Some(r) = self.reports.get_mut(idx) {
                        r.status = FileStatus::Conflict;
                        r.detail = why;
                        r.markers_written = false;
                        self.unmarkable.insert(idx);
                    }
                }
            }
        }
        Ok(())
    }

    pub(in crate::apply) fn outcome(&self) -> Outcome {
        let refused = self.reports.iter().any(|r| r.status == FileStatus::Refused);
        let conflicts = self
            .reports
            .iter()
            .any(|r| r.status == FileStatus::Conflict);
        if refused || (conflicts && (!self.opts.conflict_markers || !self.unmarkable.is_empty())) {
            Outcome::Refused
        } else if conflicts {
            Outcome::AppliedWithConflicts
        } else if self
            .reports
            .iter()
            .all(|r| r.status == FileStatus::AlreadyApplied)
        {
            Outcome::AlreadyApplied
        } else {
            Outcome::Applied
        }
    }

    /// Every project path read while planning, with its stamp then (`None`: nothing was
    /// there). Besides these, planning only looks at the parent directories of what it
    /// writes and into a directory it replaces, both of which the write phase checks
    /// again itself (a parent that is no longer a directory, or a directory that is not
    /// empty, fails the write and rolls it back).
    pub(in crate::apply) fn read_stamps(&self) -> Vec<(RelPath, Option<project::Stamp>)> {
        self.disk
            .iter()
            .map(|(rel, e)| (rel.clone(), e.stamp()))
            .collect()
    }

    /// The changes to write: every planned path whose final state differs from the project.
    pub(in crate::apply) fn ops(&mut self) -> Result<Vec<PlanOp>> {
        let planned: Vec<(RelPath, VState)> = self
            .overlay
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut ops = Vec::new();
        for (rel, fin) in planned {
            let before = self.original(&rel)?.clone();
            let before_state = VState::of(&before);
            if before_state == fin {
                continue;
            }
            let after = match fin {
                VState::Absent => {
                    // Only files and symlinks are removed; directories go when emptied.
                    if !matches!(before_state, VState::File { .. } | VState::Symlink(_)) {
                        continue;
                    }
                    Target::Absent
                }
                VState::File { data, perm } => Target::File {
                    data,
                    perm,
                    mtime: None,
                },
                VState::Symlink(t) => Target::Symlink {
                    target: t,
                    mtime: None,
                },
                VState::Dir | VState::Other => continue,
            };
            ops.push(PlanOp { rel, before, after });
        }
        Ok(ops)
    }
}
