//! `__vm-scenario seq`: several resctl-bench command lines one after another in one guest,
//! each with `--dir WORK`; what the measurement scripts and the systemd-host scenario run.
//! A line `@PROGRAM ARGS` runs another program from PATH instead, with just those arguments
//! (one brought with `vm --with-program`, e.g. upstream's resctl-bench for a side-by-side run,
//! or one of the guest's own such as journalctl). A line starting with `?` may fail: the
//! sequence goes on (a side-by-side series keeps its other runs).

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// `seq`: each command line with `--dir WORK`, in order, until one not marked `?` fails.
pub fn seq(work: &Path, cmds: &[String]) -> Result<serde_json::Value> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let mut done = Vec::new();
    for cmd in cmds {
        let t = Instant::now();
        // Where each command's log begins, for the tests that read them apart.
        eprintln!("seq: running {}", cmd);
        let (may_fail, line) = match cmd.trim_start().strip_prefix('?') {
            Some(rest) => (true, rest),
            None => (false, cmd.as_str()),
        };
        let (prog, args) = program_of(work, line);
        let st = Command::new(&prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .status()
            .with_context(|| format!("running {}", cmd))?;
        eprintln!(
            "seq: {} took {:.0} s ({})",
            cmd,
            t.elapsed().as_secs_f64(),
            st
        );
        done.push(serde_json::json!({
            "cmd": cmd,
            "status": st.code(),
            "secs": t.elapsed().as_secs_f64().round(),
        }));
        if !st.success() && !may_fail {
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

/// What a line runs: this binary with `--dir work`, or `@PROGRAM` with the line's arguments.
fn program_of(work: &Path, cmd: &str) -> (String, Vec<std::ffi::OsString>) {
    let mut words = cmd
        .split_whitespace()
        .map(std::ffi::OsString::from)
        .peekable();
    let named = words
        .peek()
        .and_then(|w| w.to_str()?.strip_prefix('@').map(str::to_string))
        .filter(|p| !p.is_empty());
    match named {
        Some(p) => {
            words.next();
            (p, words.collect())
        }
        None => {
            let mut args = vec!["--dir".into(), work.as_os_str().to_owned()];
            args.extend(words);
            ("/proc/self/exe".into(), args)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_runs_us_on_work_or_the_named_program_as_given() {
        let w = Path::new("/s/work");
        let (p, a) = program_of(w, "-r x.json run io");
        assert_eq!(p, "/proc/self/exe");
        assert_eq!(a, ["--dir", "/s/work", "-r", "x.json", "run", "io"]);
        let (p, a) = program_of(w, "@up-bench -M 2 run storage");
        assert_eq!(p, "up-bench");
        assert_eq!(a, ["-M", "2", "run", "storage"]);
    }
}
