//! Read-only git: the object store. Nothing here writes to a repository.

pub mod odb;
