//! The database handle (in progress).

/// A database handle (in progress).
#[derive(Debug, Clone)]
pub struct Db {}
