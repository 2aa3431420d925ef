//! `__vm-scenario seq`: several resctl-bench command lines one after another in one guest,
//! each with `--dir WORK`; what the measurement scripts and the systemd-host scenario run.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// `seq`: each command line with `--dir WORK`, in order, until one fails.
pub fn seq(work: &Path, cmds: &[String]) -> Result<serde_json::Value> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let mut done = Vec::new();
    for cmd in cmds {
        let t = Instant::now();
        // Where each command's log begins, for the tests that read them apart.
        eprintln!("seq: running {}", cmd);
        let st = Command::new("/proc/self/exe")
            .arg("--dir")
            .arg(work)
            .args(cmd.split_whitespace())
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .status()
            .with_context(|| format!("running {}", cmd))?;
        done.push(serde_json::json!({
            "cmd": cmd,
            "status": st.code(),
            "secs": t.elapsed().as_secs_f64().round(),
        }));
        if !st.success() {
            bail!(
                "`{}` failed ({}); done: {}",
                cmd,
                st,
                serde_json::Value::Array(done)
            );
        }
    }
    Ok(serde_json::Value::Array(done))
}
