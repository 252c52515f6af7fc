//! Paging long output as git does: only when stdout is a terminal, through
//! `$PATCHBOX_PAGER`, else `$PAGER`, else `less`; `LESS` defaults to `FRX` (quit if one
//! screen, raw colour codes, no screen clearing) and `LV` to `-c`, as git sets them. An empty
//! pager or `cat` means no pager; `--no-pager` turns it off.

use std::io::{IsTerminal, Write};
use std::process::{Command, Stdio};

/// The pager command to run for this process's stdout, if any.
pub fn pager_command(no_pager: bool) -> Option<String> {
    if no_pager || !std::io::stdout().is_terminal() {
        return None;
    }
    let cmd = ["PATCHBOX_PAGER", "PAGER"]
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .unwrap_or_else(|| "less".to_string());
    let cmd = cmd.trim();
    (!cmd.is_empty() && cmd != "cat").then(|| cmd.to_string())
}

/// Writes `text` to stdout, through the pager when [`pager_command`] names one. A pager
/// that cannot start leaves the text on stdout; one the user quits early (a broken pipe) is
/// not an error.
pub fn page(text: &[u8], no_pager: bool) {
    if let Some(cmd) = pager_command(no_pager) {
        let mut c = Command::new("sh");
        c.arg("-c").arg(&cmd).stdin(Stdio::piped());
        if std::env::var_os("LESS").is_none() {
            c.env("LESS", "FRX");
        }
        if std::env::var_os("LV").is_none() {
            c.env("LV", "-c");
        }
        if let Ok(mut child) = c.spawn() {
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(text);
            }
            let _ = child.wait();
            return;
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text).and_then(|()| out.flush());
}
