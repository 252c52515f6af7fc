//! Read-only git: the object store. Nothing here writes to a repository.

pub mod base85;
pub mod config;
pub mod delta;
pub mod ignore;
pub mod index;
pub mod odb;
pub mod oid;
pub mod quote;
pub mod repo;
