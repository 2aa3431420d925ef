//! Report rendering shared by benches.

pub mod text;
