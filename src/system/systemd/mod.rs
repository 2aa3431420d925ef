//! systemd as the manager of the host's cgroups. On a host whose PID 1 is systemd the slices
//! belong to it: their knobs are unit properties (`MemoryLow=`, `IOWeight=`, …) set at runtime
//! through systemd, slices nobody uses are created as transient units, and the processes we start
//! go into transient scopes (as `systemd-run --scope` makes them; they stay our children, so
//! they die with us). Every change has a journal record ([`crate::system::restore`]) that
//! undoes it through the same [`Manager`].
//!
//! [`Manager`] is what we ask of systemd; [`Systemctl`] asks the real one with `systemctl` and
//! `busctl` (both ship with systemd), and the unit tests use a fake (`fake.rs`).

mod cli;
mod manager;
mod props;

#[cfg(test)]
pub mod fake;

pub use cli::Systemctl;
pub use manager::*;
pub use props::*;
