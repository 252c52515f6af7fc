//! Custom strategies: isolation strategies defined outside the library, driven by the plan
//! manager like the built-in ones.
//!
//! A strategy implements the nine operations of [`StrategyProtocol`] (create, read, write,
//! diff, commit, rollback, checkpoint, restore_checkpoint, cleanup), each about one sandbox
//! named by a [`SandboxRef`]. It is registered by name in a [`StrategyRegistry`] — from the
//! host process (a Rust factory, or a C++ `patchbox::plan::CustomStrategy`), or from a shared
//! library under an allowed prefix ([`native`]: nothing is allowed by default). A
//! [`PlanManager`](crate::plan::PlanManager) given the registry makes sandboxes of
//! [`Strategy::Custom`](crate::plan::Strategy::Custom)`(name)` ([`CustomSandbox`]): the
//! library keeps the lifecycle, `state.json` and `commit_all`'s all-or-nothing; the strategy
//! keeps the content. [`BuiltInAdapter`] presents a built-in strategy through the protocol.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::path::Path;
//! use std::sync::Arc;
//! use parking_lot::Mutex;
//! use patchbox::plan::custom::{DiffView, OpResult, SandboxRef, StrategyProtocol, StrategyRegistry};
//! use patchbox::plan::{DiffEntry, DiffOp, PlanManager, Strategy};
//!
//! /// Keys and values in memory; a commit "publishes" them.
//! #[derive(Default)]
//! struct Kv { staged: Mutex<BTreeMap<String, Vec<u8>>>, published: Mutex<BTreeMap<String, Vec<u8>>> }
//!
//! impl StrategyProtocol for Kv {
//!     fn create(&self, _: &SandboxRef, _: &Path) -> OpResult<BTreeMap<String, String>> { Ok(BTreeMap::new()) }
//!     fn read(&self, _: &SandboxRef, k: &str) -> OpResult<Option<Vec<u8>>> { Ok(self.staged.lock().get(k).cloned()) }
//!     fn write(&self, _: &SandboxRef, k: &str, v: &[u8]) -> OpResult<()> {
//!         self.staged.lock().insert(k.into(), v.to_vec());
//!         Ok(())
//!     }
//!     fn diff(&self, sb: &SandboxRef) -> OpResult<DiffView> {
//!         let entries = self.staged.lock().iter().map(|(k, v)| DiffEntry {
//!             path: k.clone(), operation: DiffOp::Added, before: None, after: Some(v.clone()),
//!             before_mode: None, after_mode: None,
//!         }).collect();
//!         Ok(DiffView::new(&sb.sandbox_id, entries))
//!     }
//!     fn commit(&self, _: &SandboxRef, _: Option<&str>) -> OpResult<Option<String>> {
//!         self.published.lock().extend(self.staged.lock().clone());
//!         Ok(None)
//!     }
//!     fn rollback(&self, _: &SandboxRef, after_commit: bool) -> OpResult<()> {
//!         if after_commit { self.published.lock().clear() } else { self.staged.lock().clear() }
//!         Ok(())
//!     }
//!     fn checkpoint(&self, _: &SandboxRef, _: &str) -> OpResult<()> { Ok(()) }
//!     fn restore_checkpoint(&self, _: &SandboxRef, _: &str) -> OpResult<()> { Ok(()) }
//!     fn cleanup(&self, _: &SandboxRef) -> OpResult<()> { Ok(()) }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = tempfile::tempdir()?;
//! let resource = tempfile::tempdir()?;
//! let kv = Arc::new(Kv::default());
//! let registry = Arc::new(StrategyRegistry::new());
//! registry.register_instance("kv", kv.clone())?;
//! let mgr = PlanManager::open_with_registry(root.path(), registry)?;
//! let sb = mgr.get_or_create_sandbox("p", "cache", resource.path(), Strategy::Custom("kv".into()))?;
//! sb.write("greeting".as_ref(), b"hello")?;             // to the strategy, not to a file
//! assert_eq!(sb.diff()?.entries[0].path, "greeting");
//! mgr.commit_all("p")?;
//! assert_eq!(kv.published.lock()["greeting"], b"hello");
//! # Ok(()) }
//! ```
//!
//! | file | owns |
//! |---|---|
//! | [`protocol`] | the nine operations, [`SandboxRef`], [`DiffView`] |
//! | [`error`] | [`RegistryError`] |
//! | [`registry`] | [`StrategyRegistry`]: names, the module allow-list |
//! | [`native`] | the C ABI of strategies in shared libraries |
//! | [`sandbox`] | [`CustomSandbox`]: the lifecycle over a protocol instance |
//! | [`adapter`] | [`BuiltInAdapter`]: a built-in strategy through the protocol |
//!
//! A manager reopening custom sandboxes after a restart needs their strategies registered
//! ([`PlanManager::open_with_registry`](crate::plan::PlanManager::open_with_registry), or
//! [`PlanManager::set_registry`](crate::plan::PlanManager::set_registry) /
//! [`PlanManager::reopen_custom`](crate::plan::PlanManager::reopen_custom) later); until then
//! they stay on disk, untouched, with a warning in the manager's recovery report.

pub mod adapter;
pub mod error;
pub mod native;
pub mod protocol;
pub mod registry;
pub mod sandbox;

pub use adapter::BuiltInAdapter;
pub use error::RegistryError;
pub use protocol::{
    summarize, DiffView, OpResult, SandboxRef, StrategyFailure, StrategyProtocol, OPERATIONS,
};
pub use registry::{ModuleSpec, StrategyFactory, StrategyRegistry};
pub use sandbox::CustomSandbox;
