//! Confinement of a tool's process tree with Landlock: a tool run in a sandbox may write under
//! the sandbox, a temporary directory and the directories its caller adds, and nowhere else —
//! the user's project above all. Reads and execution are not restricted.
//!
//! The ruleset is built in the parent (building it allocates), and the child only makes two
//! system calls between `fork` and `exec` (`prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self`), both async-signal-safe. Landlock is inherited by every process
//! the tool starts and cannot be lifted by them. Paths are resolved by the kernel at access
//! time, so a symlink in the sandbox pointing into the project cannot be written through.
//!
//! A temporary directory that contains the project (or the sandbox root) is not granted:
//! Landlock cannot grant a directory minus a subtree, so the tool gets a private `TMPDIR`
//! instead (created by the manager, outside the sandbox so it is never in a patch).
//!
//! ```no_run
//! # fn main() -> patchbox::Result<()> {
//! use patchbox::{Options, SandboxManager};
//! let mgr = SandboxManager::with_options("/path/to/project", Options::default())?;
//! let sb = mgr.create_sandbox("t1", None)?;
//! // The tool may write in sb.path and its TMPDIR; `touch /path/to/project/x` fails (EACCES).
//! let status = mgr.command(&sb, "sh").args(["-c", "touch x"]).status();
//! println!("{:?} under {:?}", status, mgr.confinement());
//! # Ok(()) }
//! ```

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{path_beneath_rules, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, ABI};

/// Whether tools run by a manager are confined, as far as this kernel allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// Writes outside the allowed directories fail with a permission error.
    Enforced,
    /// Confinement was asked for, but this kernel has no (usable) Landlock: tools run
    /// unconfined. The reason says what failed.
    Unavailable(String),
    /// The caller turned confinement off ([`crate::session::manager::Options::no_confine`]).
    Off,
}

/// The Landlock ABI this module asks for; an older kernel gets what it supports (the crate's
/// best-effort mode), and one without Landlock none.
const ABI_WANTED: ABI = ABI::V5;

/// Temporary directories a tool may expect to write, granted when they hold neither the
/// project nor the sandbox root.
fn temp_dirs() -> Vec<PathBuf> {
    let mut v = vec![std::env::temp_dir()];
    for d in ["/tmp", "/var/tmp", "/dev/shm"] {
        v.push(PathBuf::from(d));
    }
    v
}

/// The directories a confined tool may write: `sandbox`, `private_tmp`, `/dev` (null, tty,
/// pts…), each temporary directory that contains none of `protected`, and `extra`. Missing
/// directories are left out.
pub(crate) fn writable_dirs(
    sandbox: &Path,
    private_tmp: &Path,
    protected: &[&Path],
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    let canon = |p: &Path| p.canonicalize().ok();
    let protected: Vec<PathBuf> = protected.iter().filter_map(|p| canon(p)).collect();
    let mut out: Vec<PathBuf> = [sandbox, private_tmp, Path::new("/dev")]
        .iter()
        .filter_map(|p| canon(p))
        .collect();
    for t in temp_dirs() {
        if let Some(t) = canon(&t) {
            if !protected.iter().any(|p| p.starts_with(&t)) && !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out.extend(extra.iter().filter_map(|p| canon(p)));
    out
}

/// Builds the ruleset allowing writes under `writable` only. `Ok(None)`: the kernel has no
/// Landlock (or an ABI too old to restrict anything).
fn ruleset(writable: &[PathBuf]) -> Result<Option<OwnedFd>, String> {
    let created = Ruleset::default()
        .handle_access(AccessFs::from_write(ABI_WANTED))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(
            writable,
            AccessFs::from_write(ABI_WANTED),
        ))
        .map_err(|e| e.to_string())?;
    Ok(created.into())
}

/// Whether this kernel can confine tools, probed once by confining a real child process: a
/// `sh` allowed to write in one new directory must fail to create a file in another. (A
/// ruleset the kernel accepts is not proof: Landlock's best-effort mode may drop what it
/// cannot enforce.)
pub fn probe() -> Confinement {
    static PROBE: std::sync::OnceLock<Confinement> = std::sync::OnceLock::new();
    PROBE.get_or_init(probe_now).clone()
}

fn probe_now() -> Confinement {
    let Ok(dir) = tempfile_dir() else {
        return Confinement::Unavailable("cannot make a directory to probe Landlock in".into());
    };
    let (allowed, denied) = (dir.join("allowed"), dir.join("denied"));
    let made = std::fs::create_dir(&allowed).and_then(|()| std::fs::create_dir(&denied));
    let result = match made {
        Err(e) => Confinement::Unavailable(format!("cannot probe Landlock: {e}")),
        Ok(()) => {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", ": > \"$1\"/f; : > \"$2\"/f", "sh"])
                .arg(&allowed)
                .arg(&denied)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            match confine(&mut cmd, std::slice::from_ref(&allowed)) {
                Confinement::Enforced => match cmd.status() {
                    Err(e) => Confinement::Unavailable(format!("cannot probe Landlock: {e}")),
                    Ok(_) if denied.join("f").exists() => Confinement::Unavailable(
                        "Landlock accepted the rules but did not enforce them".into(),
                    ),
                    Ok(_) if !allowed.join("f").exists() => {
                        Confinement::Unavailable("Landlock refused a write it should allow".into())
                    }
                    Ok(_) => Confinement::Enforced,
                },
                other => other,
            }
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A fresh private directory under the system's temporary directory.
fn tempfile_dir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(".patchbox-landlock-probe-{}", ulid::Ulid::new()));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// Makes `cmd`'s process (and every process it starts) unable to write outside `writable`.
/// Returns how it went; on a kernel without Landlock the command is left unconfined and the
/// result says so. (Callers that need to know whether confinement really holds ask
/// [`probe`], which checks it on a real process.)
pub(crate) fn confine(cmd: &mut Command, writable: &[PathBuf]) -> Confinement {
    let fd = match ruleset(writable) {
        Ok(Some(fd)) => fd,
        Ok(None) => return Confinement::Unavailable("the kernel has no Landlock".into()),
        Err(e) => return Confinement::Unavailable(e),
    };
    // SAFETY: the closure runs in the forked child before exec and makes only two system
    // calls, both async-signal-safe; `fd` stays open in the parent until `cmd` is dropped,
    // so the child's copy is valid.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Confinement::Enforced
}
