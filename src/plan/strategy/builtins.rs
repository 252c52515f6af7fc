//! The built-in strategies by name: what every
//! [`StrategyRegistry`](crate::plan::custom::StrategyRegistry) holds from its construction.
//! Each strategy's file defines its `FACTORY`; adding a built-in strategy is its file and one
//! line here (and its `mod` line in `strategy/mod.rs`).

use std::sync::Arc;

use super::factory::BackendFactory;
use super::{copy_on_write, git_worktree, none, overlay, sqlite};

/// The built-in strategies by name, as every registry holds them from its construction.
pub fn builtins() -> Vec<(&'static str, Arc<dyn BackendFactory>)> {
    vec![
        ("none", Arc::new(none::FACTORY)),
        ("copy_on_write", Arc::new(copy_on_write::FACTORY)),
        ("overlay", Arc::new(overlay::FACTORY)),
        ("git_worktree", Arc::new(git_worktree::FACTORY)),
        ("transaction_rollback", Arc::new(sqlite::FACTORY)),
    ]
}
