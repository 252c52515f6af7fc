//! Git-style patches: the model, the parser and the writer.

pub mod parse;
pub mod write;
