//! Which backend isolates a sandbox's writes: the kernel's OverlayFS, else `fuse-overlayfs`,
//! else a plain copy; and the one reader of [`MODE_ENV`], which forces one of them.
//!
//! The environment is read at every decision, never cached for the process: a caller (and
//! the test suites) may change it between two creates. A session decides once, at its first
//! sandbox; a plan sandbox at its create.

use std::fmt;

use crate::fs::overlay::mount::Backend;

/// The environment variable that forces the backend: `kernel`, `fuse` or `copy`. Unset (or
/// empty) chooses the first one available, in that order.
pub const MODE_ENV: &str = crate::fs::overlay::mount::MODE_ENV;

/// How a sandbox presents its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The kernel's OverlayFS (`mount -t overlay`).
    Kernel,
    /// `fuse-overlayfs` in user space.
    Fuse,
    /// No mount: a copy.
    Copy,
}

impl Mode {
    /// Every mode, in the order they are tried when none is forced.
    pub const ALL: [Mode; 3] = [Mode::Kernel, Mode::Fuse, Mode::Copy];

    /// The name in a plan sandbox's metadata: `kernel`, `fuse`, `copy_on_write`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::Fuse => "fuse",
            Mode::Copy => "copy_on_write",
        }
    }

    /// The mode named `name` (its metadata name, or `copy` for [`Mode::Copy`]).
    pub fn from_name(name: &str) -> Option<Mode> {
        match name {
            "kernel" => Some(Mode::Kernel),
            "fuse" => Some(Mode::Fuse),
            "copy" | "copy_on_write" => Some(Mode::Copy),
            _ => None,
        }
    }

    /// The overlay backend of this mode; `None` for a copy.
    pub fn backend(self) -> Option<Backend> {
        match self {
            Mode::Kernel => Some(Backend::Kernel),
            Mode::Fuse => Some(Backend::Fuse),
            Mode::Copy => None,
        }
    }

    /// The mode [`MODE_ENV`] forces now, if any; an unknown value is an error.
    pub fn forced() -> Result<Option<Mode>, BadMode> {
        match std::env::var(MODE_ENV) {
            Ok(v) if v.is_empty() => Ok(None),
            Ok(v) => Mode::from_name(&v).map(Some).ok_or(BadMode(v)),
            Err(_) => Ok(None),
        }
    }

    /// The modes to try, in order: the forced one alone, else every mode.
    pub fn candidates(forced: Option<Mode>) -> Vec<Mode> {
        match forced {
            Some(m) => vec![m],
            None => Mode::ALL.to_vec(),
        }
    }
}

/// A value of [`MODE_ENV`] that names no mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadMode(pub String);

impl fmt::Display for BadMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MODE_ENV}={:?}: expected kernel, fuse or copy", self.0)
    }
}

impl std::error::Error for BadMode {}

/// The modes tried and refused, in order, each with why.
pub type Refusals<E> = Vec<(Mode, E)>;

/// Chooses the mode: the candidates of `forced` in order, `attempt` trying each overlay
/// backend (a copy always succeeds). Returns the mode had and the refusals of the modes
/// tried before it; when none could be had (only when one was forced), the refusals.
pub fn choose<E>(
    forced: Option<Mode>,
    mut attempt: impl FnMut(Backend) -> Result<(), E>,
) -> Result<(Mode, Refusals<E>), Refusals<E>> {
    let mut refusals = Vec::new();
    for m in Mode::candidates(forced) {
        let tried = match m.backend() {
            Some(b) => attempt(b),
            None => Ok(()),
        };
        match tried {
            Ok(()) => return Ok((m, refusals)),
            Err(e) => refusals.push((m, e)),
        }
    }
    Err(refusals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(Mode::from_name("copy"), Some(Mode::Copy));
        assert_eq!(Mode::from_name("nfs"), None);
    }

    #[test]
    fn choose_falls_back_in_order() {
        let (m, refused) = choose(None, |b| match b {
            Backend::Kernel => Err("no"),
            Backend::Fuse => Ok(()),
        })
        .unwrap();
        assert_eq!(m, Mode::Fuse);
        assert_eq!(refused, vec![(Mode::Kernel, "no")]);
        let (m, _) = choose(None, |_| Err::<(), _>("no")).unwrap();
        assert_eq!(m, Mode::Copy);
        let refused = choose(Some(Mode::Kernel), |_| Err::<(), _>("no")).unwrap_err();
        assert_eq!(refused, vec![(Mode::Kernel, "no")]);
    }
}
