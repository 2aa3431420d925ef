//! The processes benches start: `hashd`, the bundled latency-sensitive workload, and the
//! random-read IO load; the memory hog that floods memory against them; an IO engine job in a
//! process of its own (`iojob`), which a cgroup can hold.

pub mod hashd;
pub mod ioengine;
pub mod iojob;
pub mod memhog;
pub mod randread;

use crate::system::cgroup::CgroupFs;
use anyhow::{Context, Result};
use std::process::{Child, Command, Stdio};

/// Starts `cmd`, one of our hidden subcommands that take `--held`, and moves it into cgroup
/// `cg` (when given) before releasing it (closing its stdin): memory is charged to the cgroup a
/// process touches it in, and the charge stays when the process moves. `what` names it in
/// errors; a child that can't be placed is killed.
pub(crate) fn spawn_placed(
    cmd: &mut Command,
    cg: Option<(&CgroupFs, &str)>,
    what: &str,
) -> Result<Child> {
    cmd.arg("--held").stdin(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("starting {}", what))?;
    if let Some((fs, name)) = cg {
        if let Err(e) = fs.move_pid(name, child.id()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e).with_context(|| format!("moving {} into {}", what, name));
        }
    }
    drop(child.stdin.take());
    Ok(child)
}
