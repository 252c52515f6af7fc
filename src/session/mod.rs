//! The engine-session layer: the manager, the scoped sandbox swap, the pending store, and
//! recovery of crashed sessions.

pub mod confine;
pub mod delegation;
pub mod layout;
pub mod manager;
pub mod pending;
pub mod recover;
pub mod scoped;
