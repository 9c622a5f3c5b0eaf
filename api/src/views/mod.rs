//! The response bodies as the document describes them (`ToSchema`), built
//! from the ledger's types.

mod holds;
mod operations;
mod problem;

pub use holds::HoldStatus;
pub use operations::Health;
pub use problem::{Problem, ProblemCode};
