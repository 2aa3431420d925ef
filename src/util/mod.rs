//! Small helpers every layer may use: reading one-line kernel files, and starting child
//! processes that die with us.

pub mod fs;
pub mod proc;
