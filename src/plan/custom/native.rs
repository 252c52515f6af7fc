//! Custom strategies in shared libraries: the C ABI a module implements.
//!
//! A module exports, for each class it offers, `patchbox_strategy_<class>`:
//!
//! ```c
//! typedef void (*pb_emit_fn)(void *out, const uint8_t *data, size_t len);
//! typedef int32_t (*pb_op_fn)(void *ctx, const uint8_t *sandbox_json, size_t sandbox_len,
//!                             const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len,
//!                             void *out, pb_emit_fn emit);
//! struct pb_strategy_vtable {
//!     uint32_t abi_version;           /* PATCHBOX_STRATEGY_ABI = 1 */
//!     void *ctx;                      /* passed to every op; freed by destroy */
//!     pb_op_fn create, read, write, diff, commit, rollback, checkpoint,
//!              restore_checkpoint, cleanup;   /* NULL = missing: registration refused */
//!     int32_t (*is_rollbackable)(void *ctx);  /* optional; NULL = yes */
//!     void (*destroy)(void *ctx);              /* optional */
//! };
//! int32_t patchbox_strategy_<class>(struct pb_strategy_vtable *out); /* 0 = ok */
//! ```
//!
//! The library zeroes the table, calls the entry point once at registration and keeps the
//! instance for every sandbox of the strategy (so ops may run on several threads at once).
//! Every op gets the sandbox as the JSON of [`SandboxRef`] (`created_at` in Unix
//! milliseconds) and two byte arguments; it returns 0 on success (`read`: 1 when the path does
//! not exist), anything else on failure, and writes its answer — or its error message — with
//! `emit(out, …)` (any number of calls, appended):
//!
//! | op | `a` | `b` | answer |
//! |---|---|---|---|
//! | create | original path | — | JSON object of metadata (or nothing) |
//! | read | path | — | the bytes |
//! | write | path | data | — |
//! | diff | — | — | `{"entries":[{"path","operation","before","after"}],"summary"}`, contents as arrays of byte values or `null` |
//! | commit | message (NULL: none) | — | the commit ref (nothing: none) |
//! | rollback | `discard` or `undo_commit` | — | — |
//! | checkpoint, restore_checkpoint | checkpoint id | — | — |
//! | cleanup | — | — | — |
//!
//! Ops must not unwind (a C++ module catches its exceptions inside the op).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use super::protocol::{
    DiffView, OpResult, SandboxRef, StrategyFailure, StrategyProtocol, OPERATIONS,
};
use super::registry::RegistryError;
use crate::plan::model::{DiffEntry, DiffOp};

/// The ABI version this library speaks.
pub const ABI_VERSION: u32 = 1;

/// Appends an op's answer to the library's buffer.
pub type EmitFn = unsafe extern "C" fn(out: *mut c_void, data: *const u8, len: usize);

/// One operation of the table.
pub type OpFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    sandbox_json: *const u8,
    sandbox_len: usize,
    a: *const u8,
    a_len: usize,
    b: *const u8,
    b_len: usize,
    out: *mut c_void,
    emit: EmitFn,
) -> i32;

/// The table a module's entry point fills (see the module docs).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StrategyVTable {
    /// [`ABI_VERSION`].
    pub abi_version: u32,
    /// The instance, passed to every op.
    pub ctx: *mut c_void,
    /// `create`.
    pub create: Option<OpFn>,
    /// `read`.
    pub read: Option<OpFn>,
    /// `write`.
    pub write: Option<OpFn>,
    /// `diff`.
    pub diff: Option<OpFn>,
    /// `commit`.
    pub commit: Option<OpFn>,
    /// `rollback`.
    pub rollback: Option<OpFn>,
    /// `checkpoint`.
    pub checkpoint: Option<OpFn>,
    /// `restore_checkpoint`.
    pub restore_checkpoint: Option<OpFn>,
    /// `cleanup`.
    pub cleanup: Option<OpFn>,
    /// Optional: non-zero when a commit can be undone (NULL: yes).
    pub is_rollbackable: Option<unsafe extern "C" fn(ctx: *mut c_void) -> i32>,
    /// Optional: frees `ctx`.
    pub destroy: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
}

impl StrategyVTable {
    fn empty() -> StrategyVTable {
        StrategyVTable {
            abi_version: 0,
            ctx: std::ptr::null_mut(),
            create: None,
            read: None,
            write: None,
            diff: None,
            commit: None,
            rollback: None,
            checkpoint: None,
            restore_checkpoint: None,
            cleanup: None,
            is_rollbackable: None,
            destroy: None,
        }
    }

    fn ops(&self) -> [Option<OpFn>; 9] {
        [
            self.create,
            self.read,
            self.write,
            self.diff,
            self.commit,
            self.rollback,
            self.checkpoint,
            self.restore_checkpoint,
            self.cleanup,
        ]
    }

    /// The operations the table lacks, in protocol order.
    pub fn missing(&self) -> Vec<String> {
        self.ops()
            .iter()
            .zip(OPERATIONS)
            .filter(|(op, _)| op.is_none())
            .map(|(_, name)| name.to_string())
            .collect()
    }
}

/// The entry point's type.
type EntryFn = unsafe extern "C" fn(out: *mut StrategyVTable) -> i32;

unsafe extern "C" fn emit(out: *mut c_void, data: *const u8, len: usize) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if out.is_null() || (data.is_null() && len > 0) {
            return;
        }
        // SAFETY: `out` is the `Vec<u8>` the library passed to this very call; `data` is
        // `len` readable bytes by the ABI's contract.
        let buf = unsafe { &mut *(out as *mut Vec<u8>) };
        if len > 0 {
            buf.extend_from_slice(unsafe { std::slice::from_raw_parts(data, len) });
        }
    }));
}

/// A loaded module's strategy: one instance, kept while a sandbox or the registry uses it.
pub struct NativeModule {
    vt: StrategyVTable,
    name: String,
    // Dropped after `vt`'s destroy ran (see Drop): the code must outlive the instance.
    lib: Arc<libloading::Library>,
}

// SAFETY: the ABI requires a module's ops to be callable from any thread at once (the module
// docs say so); `ctx` is only passed back to them.
unsafe impl Send for NativeModule {}
// SAFETY: as above.
unsafe impl Sync for NativeModule {}

impl NativeModule {
    /// Loads `class` of `module` (already checked against the allow-list).
    pub(crate) fn load(
        module: &Path,
        class: &str,
        name: &str,
    ) -> Result<Arc<NativeModule>, RegistryError> {
        let load_err = |reason: String| RegistryError::Load {
            module: module.to_path_buf(),
            reason,
        };
        let ident = !class.is_empty()
            && class
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ident {
            return Err(load_err(format!("class {class:?} is not a C identifier")));
        }
        // SAFETY: loading runs the module's initializers; the host allowed this path.
        let lib =
            unsafe { libloading::Library::new(module) }.map_err(|e| load_err(e.to_string()))?;
        let symbol = format!("patchbox_strategy_{class}");
        let mut vt = StrategyVTable::empty();
        {
            // SAFETY: the ABI fixes the entry point's type.
            let entry: libloading::Symbol<'_, EntryFn> = unsafe { lib.get(symbol.as_bytes()) }
                .map_err(|e| load_err(format!("no symbol {symbol}: {e}")))?;
            // SAFETY: `vt` is a valid, zeroed table for the entry point to fill.
            let rc = unsafe { entry(&mut vt) };
            if rc != 0 {
                return Err(load_err(format!("{symbol} failed ({rc})")));
            }
        }
        let module_ = NativeModule {
            vt,
            name: name.to_string(),
            lib: Arc::new(lib),
        };
        if vt.abi_version != ABI_VERSION {
            return Err(load_err(format!(
                "{symbol}: ABI version {} (this library speaks {ABI_VERSION})",
                vt.abi_version
            )));
        }
        let missing = vt.missing();
        if !missing.is_empty() {
            return Err(RegistryError::ProtocolMismatch {
                strategy: name.to_string(),
                missing,
            });
        }
        Ok(Arc::new(module_))
    }

    /// The module's path-independent handle for the registry's factory.
    pub(crate) fn instantiate(self: &Arc<Self>) -> Arc<dyn StrategyProtocol> {
        self.clone()
    }

    fn call(
        &self,
        op: &str,
        f: Option<OpFn>,
        sandbox: &SandboxRef,
        a: Option<&[u8]>,
        b: &[u8],
    ) -> OpResult<(i32, Vec<u8>)> {
        let f = f.ok_or_else(|| StrategyFailure::new(format!("{}: no {op}", self.name)))?;
        let json = serde_json::to_vec(sandbox)
            .map_err(|e| StrategyFailure::new(format!("encode sandbox: {e}")))?;
        let mut out: Vec<u8> = Vec::new();
        let (ap, al) = a.map_or((std::ptr::null(), 0), |a| (a.as_ptr(), a.len()));
        // SAFETY: every pointer is valid for its length during the call; `out` is the buffer
        // `emit` appends to.
        let rc = unsafe {
            f(
                self.vt.ctx,
                json.as_ptr(),
                json.len(),
                ap,
                al,
                b.as_ptr(),
                b.len(),
                &mut out as *mut Vec<u8> as *mut c_void,
                emit,
            )
        };
        Ok((rc, out))
    }

    fn ok(&self, op: &str, (rc, out): (i32, Vec<u8>)) -> OpResult<Vec<u8>> {
        if rc == 0 {
            Ok(out)
        } else {
            Err(StrategyFailure::new(format!(
                "{op} failed ({rc}): {}",
                String::from_utf8_lossy(&out)
            )))
        }
    }
}

impl Drop for NativeModule {
    fn drop(&mut self) {
        if let Some(d) = self.vt.destroy {
            // SAFETY: `ctx` came from this module's entry point and is destroyed once.
            let _ = catch_unwind(AssertUnwindSafe(|| unsafe { d(self.vt.ctx) }));
        }
        let _ = &self.lib;
    }
}

#[derive(serde::Deserialize)]
struct WireEntry {
    path: String,
    operation: String,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
}

#[derive(serde::Deserialize)]
struct WireDiff {
    entries: Vec<WireEntry>,
    #[serde(default)]
    summary: Option<String>,
}

fn bytes_of(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

impl StrategyProtocol for NativeModule {
    fn create(&self, sandbox: &SandboxRef, original: &Path) -> OpResult<BTreeMap<String, String>> {
        let r = self.call(
            "create",
            self.vt.create,
            sandbox,
            Some(bytes_of(original)),
            &[],
        )?;
        let out = self.ok("create", r)?;
        if out.iter().all(u8::is_ascii_whitespace) {
            return Ok(BTreeMap::new());
        }
        serde_json::from_slice(&out)
            .map_err(|e| StrategyFailure::new(format!("create: bad metadata JSON: {e}")))
    }

    fn read(&self, sandbox: &SandboxRef, path: &str) -> OpResult<Option<Vec<u8>>> {
        let (rc, out) = self.call("read", self.vt.read, sandbox, Some(path.as_bytes()), &[])?;
        if rc == 1 {
            return Ok(None);
        }
        self.ok("read", (rc, out)).map(Some)
    }

    fn write(&self, sandbox: &SandboxRef, path: &str, data: &[u8]) -> OpResult<()> {
        let r = self.call("write", self.vt.write, sandbox, Some(path.as_bytes()), data)?;
        self.ok("write", r).map(drop)
    }

    fn diff(&self, sandbox: &SandboxRef) -> OpResult<DiffView> {
        let r = self.call("diff", self.vt.diff, sandbox, None, &[])?;
        let out = self.ok("diff", r)?;
        let w: WireDiff = serde_json::from_slice(&out)
            .map_err(|e| StrategyFailure::new(format!("diff: bad JSON: {e}")))?;
        let mut entries = Vec::with_capacity(w.entries.len());
        for e in w.entries {
            let Some(operation) = DiffOp::from_name(&e.operation) else {
                return Err(StrategyFailure::new(format!(
                    "diff: unknown operation {:?} for {}",
                    e.operation, e.path
                )));
            };
            entries.push(DiffEntry {
                path: e.path,
                operation,
                before: e.before,
                after: e.after,
                before_mode: None,
                after_mode: None,
            });
        }
        let mut view = DiffView::new(&sandbox.sandbox_id, entries);
        if let Some(s) = w.summary {
            view.summary = s;
        }
        Ok(view)
    }

    fn commit(&self, sandbox: &SandboxRef, message: Option<&str>) -> OpResult<Option<String>> {
        let r = self.call(
            "commit",
            self.vt.commit,
            sandbox,
            message.map(str::as_bytes),
            &[],
        )?;
        let out = self.ok("commit", r)?;
        Ok((!out.is_empty()).then(|| String::from_utf8_lossy(&out).into_owned()))
    }

    fn rollback(&self, sandbox: &SandboxRef, after_commit: bool) -> OpResult<()> {
        let scope: &[u8] = if after_commit {
            b"undo_commit"
        } else {
            b"discard"
        };
        let r = self.call("rollback", self.vt.rollback, sandbox, Some(scope), &[])?;
        self.ok("rollback", r).map(drop)
    }

    fn checkpoint(&self, sandbox: &SandboxRef, checkpoint_id: &str) -> OpResult<()> {
        let r = self.call(
            "checkpoint",
            self.vt.checkpoint,
            sandbox,
            Some(checkpoint_id.as_bytes()),
            &[],
        )?;
        self.ok("checkpoint", r).map(drop)
    }

    fn restore_checkpoint(&self, sandbox: &SandboxRef, checkpoint_id: &str) -> OpResult<()> {
        let r = self.call(
            "restore_checkpoint",
            self.vt.restore_checkpoint,
            sandbox,
            Some(checkpoint_id.as_bytes()),
            &[],
        )?;
        self.ok("restore_checkpoint", r).map(drop)
    }

    fn cleanup(&self, sandbox: &SandboxRef) -> OpResult<()> {
        let r = self.call("cleanup", self.vt.cleanup, sandbox, None, &[])?;
        self.ok("cleanup", r).map(drop)
    }

    fn is_rollbackable(&self) -> bool {
        match self.vt.is_rollbackable {
            // SAFETY: the module's own function over its own ctx.
            Some(f) => unsafe { f(self.vt.ctx) != 0 },
            None => true,
        }
    }
}
