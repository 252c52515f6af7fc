//! The git runner: every git call of the strategy goes through [`Git`], which runs the git
//! CLI with the repository-locating variables removed, `LC_ALL=C`, no prompts and fixed
//! configuration overrides, and maps a failure to an error naming the command, the directory
//! and git's stderr. Also the fallback identity ([`identity_args`]) and the one commit-making
//! call ([`commit_tree`]) built on it.
//!
//! Nothing here knows about sandboxes or records: it is the seam between the strategy and
//! the git process.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Environment variables that point git at another repository, index or configuration;
/// removed from every git call.
const GIT_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_QUARANTINE_PATH",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_SHALLOW_FILE",
    "GIT_REPLACE_REF_BASE",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
];

/// What a git call produced.
pub(super) struct GitOut {
    pub(super) ok: bool,
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: String,
}

impl From<Output> for GitOut {
    fn from(out: Output) -> Self {
        GitOut {
            ok: out.status.success(),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }
    }
}

/// One git call: `git <args>` in `dir`, with an optional index and standard input.
#[derive(Clone, Copy)]
pub(super) struct Git<'a> {
    dir: &'a Path,
    index: Option<&'a Path>,
    stdin: Option<&'a [u8]>,
}

impl<'a> Git<'a> {
    pub(super) fn at(dir: &'a Path) -> Self {
        Git {
            dir,
            index: None,
            stdin: None,
        }
    }

    pub(super) fn index(mut self, index: &'a Path) -> Self {
        self.index = Some(index);
        self
    }

    pub(super) fn input(mut self, data: &'a [u8]) -> Self {
        self.stdin = Some(data);
        self
    }

    /// Runs it; a git that cannot be started is an error, a failing git is `ok == false`.
    pub(super) fn run(&self, args: &[&str]) -> Result<GitOut, String> {
        let mut c = Command::new("git");
        c.current_dir(self.dir);
        for v in GIT_ENV {
            c.env_remove(v);
        }
        c.env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_EDITOR", "true")
            .env("GIT_MERGE_AUTOEDIT", "no")
            .env("GIT_LITERAL_PATHSPECS", "1");
        if let Some(i) = self.index {
            c.env("GIT_INDEX_FILE", i);
        }
        c.args([
            "-c",
            "gc.auto=0",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "core.quotePath=false",
        ]);
        c.args(args)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Under a plan's lock, git inherits it (the lock then outlives a killed caller until
        // git has exited, see `plan::lock`) and runs in its own process group (a signal to
        // the caller's group does not stop it halfway through the user's repository).
        let fds = crate::plan::lock::held_fds();
        if !fds.is_empty() {
            use std::os::unix::process::CommandExt;
            c.process_group(0);
            // SAFETY: the closure runs in the child between fork and exec; it only calls
            // fcntl, which is async-signal-safe, and allocates nothing.
            unsafe {
                c.pre_exec(move || {
                    for &fd in &fds {
                        if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let mut child = c
            .spawn()
            .map_err(|e| format!("cannot run git {}: {e}", args.join(" ")))?;
        // Written from a thread: git may fill stdout before reading all its input.
        let writer = match (self.stdin, child.stdin.take()) {
            (Some(data), Some(mut pipe)) => {
                use std::io::Write;
                let data = data.to_vec();
                Some(std::thread::spawn(move || pipe.write_all(&data)))
            }
            _ => None,
        };
        let out = child
            .wait_with_output()
            .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        Ok(out.into())
    }

    /// Runs it and requires success; the error names the command, the directory and
    /// git's stderr.
    pub(super) fn ok(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let out = self.run(args)?;
        if out.ok {
            Ok(out.stdout)
        } else {
            Err(format!(
                "git {} (in {}) failed: {}",
                args.join(" "),
                self.dir.display(),
                out.stderr
            ))
        }
    }

    /// [`Git::ok`] with stdout as one trimmed line.
    pub(super) fn line(&self, args: &[&str]) -> Result<String, String> {
        self.ok(args)
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
    }
}

/// `-c user.name=… -c user.email=…` when the repository has no identity configured.
pub(super) fn identity_args(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (key, fallback) in [
        ("user.name", "patchbox"),
        ("user.email", "patchbox@localhost"),
    ] {
        let set = Git::at(dir)
            .run(&["config", "--get", key])
            .is_ok_and(|o| o.ok && !o.stdout.trim_ascii().is_empty());
        if !set {
            out.push("-c".to_string());
            out.push(format!("{key}={fallback}"));
        }
    }
    out
}

/// `git <ident> commit-tree <tree> -p <parent>… -m <message>` in `dir`: a commit object
/// (no hooks, no ref moved); `ident` is from [`identity_args`]. Returns its id.
pub(super) fn commit_tree(
    dir: &Path,
    ident: &[String],
    tree: &str,
    parents: &[&str],
    message: &str,
) -> Result<String, String> {
    let mut args: Vec<&str> = ident.iter().map(String::as_str).collect();
    args.extend(["commit-tree", tree]);
    for p in parents {
        args.extend(["-p", p]);
    }
    args.extend(["-m", message]);
    Git::at(dir).line(&args)
}
