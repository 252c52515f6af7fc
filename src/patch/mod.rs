//! Git-style patches: the model, the parser and the writer, and the line algorithms that
//! apply one (placing hunks, the 3-way merge).

pub(crate) mod line_diff;
pub(crate) mod merge3;
pub mod parse;
pub(crate) mod place;
pub mod write;
