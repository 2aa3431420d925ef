//! Carrying out an `apply` plan — `--now` (the kernel's knobs), `--boot` (the hwdb file,
//! `systemd-hwdb update`, a udev re-trigger, then a check that systemd applied it) — and
//! `--undo`. Everything a step needs is checked before anything changes; every change is in
//! the state file before it is made.

use super::state::State;
use super::{udev, usage, Plan};
use crate::system::iocost::{self, restore_model_line, restore_qos_line};
use crate::system::restore::write_file;
use crate::system::HostPaths;
use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The host programs `--boot` and `--undo` run (a test double stands in for them in tests).
pub trait Tools {
    /// Runs `argv` to completion; an error names the program and its complaint.
    fn run(&mut self, hp: &HostPaths, argv: &[&str]) -> Result<()>;
}

/// The host's own programs, from PATH.
pub struct HostTools;

impl Tools for HostTools {
    fn run(&mut self, _hp: &HostPaths, argv: &[&str]) -> Result<()> {
        let out = std::process::Command::new(argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("running {}", argv[0]))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            bail!(
                "`{}` failed ({}): {}",
                argv.join(" "),
                out.status,
                err.trim().lines().last().unwrap_or("")
            );
        }
        Ok(())
    }
}

/// Which steps to take.
#[derive(Debug, Clone, Copy, Default)]
pub struct Steps {
    pub now: bool,
    pub boot: bool,
}

/// Keeps both knobs' values from before the first apply in the state file, before a write.
fn record_knobs(hp: &HostPaths, plan: &Plan, state: &mut State) -> Result<()> {
    let n = super::devnr(&plan.dev);
    let old_model = restore_model_line(n, &iocost::read_model(hp, n)?);
    let old_qos = restore_qos_line(n, &iocost::read_qos(hp, n)?);
    state
        .applied
        .add_knob(&hp.cgroup().join("io.cost.model"), &old_model);
    state
        .applied
        .add_knob(&hp.cgroup().join("io.cost.qos"), &old_qos);
    state.save()
}

/// Whether a file can be made at `path`: its nearest existing directory must be writable (a
/// read-only file system says no even to root).
fn writable(path: &Path) -> Result<()> {
    let target = path
        .ancestors()
        .skip(1)
        .find(|a| a.is_dir())
        .unwrap_or(Path::new("/"));
    let c = CString::new(target.as_os_str().as_bytes())?;
    // SAFETY: access(2) on a NUL-terminated path we own.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(usage(format!(
            "can't write {} ({}); nothing changed",
            target.display(),
            e
        )));
    }
    Ok(())
}

/// Everything `steps` needs, checked before anything changes; the hwdb text for `--boot`.
fn preflight(hp: &HostPaths, plan: &Plan, steps: Steps) -> Result<Option<String>> {
    let qos = hp.cgroup().join("io.cost.qos");
    if !qos.exists() {
        return Err(usage(format!(
            "this kernel has no io.cost ({} is missing: cgroup2 with the io controller and \
             CONFIG_BLK_CGROUP_IOCOST are needed); nothing changed",
            qos.display()
        )));
    }
    writable(&hp.path(super::state::STATE_FILE))?;
    if !steps.boot {
        return Ok(None);
    }
    if udev::iocost_tool(hp).is_none() {
        return Err(usage(
            "--boot: this host's systemd has no iocost tool (systemd 254 and later run it from \
             udev's 90-iocost.rules; `systemctl --version` tells yours), so nothing would apply \
             the solution at boot; use --now, e.g. from a unit that runs at each boot; nothing changed"
                .into(),
        ));
    }
    let text = plan
        .hwdb_text()
        .map_err(|why| usage(format!("--boot: {}; nothing changed", why)))?;
    let path = plan.hwdb_path(hp);
    writable(&path)?;
    Ok(Some(text))
}

/// Carries out `steps` of `plan`; what it did goes to `out`.
pub fn execute(
    hp: &HostPaths,
    plan: &Plan,
    steps: Steps,
    tools: &mut dyn Tools,
    out: &mut String,
) -> Result<()> {
    let text = preflight(hp, plan, steps)?;
    let mut state = State::open(hp)?;
    if text.is_some() {
        let path = plan.hwdb_path(hp);
        if let Ok(cur) = std::fs::read_to_string(&path) {
            if state.applied.file(&path).map(|f| &f.content) != Some(&cur) {
                return Err(usage(format!(
                    "--boot: {} is there and apply didn't write it (or it was changed since); \
                     move it away first; nothing changed",
                    path.display()
                )));
            }
        }
    }
    if steps.now {
        // The lines systemd's tool writes, QoS first.
        record_knobs(hp, plan, &mut state)?;
        let (qos, model) = plan.knob_lines();
        write_file(&hp.cgroup().join("io.cost.qos"), &qos)?;
        write_file(&hp.cgroup().join("io.cost.model"), &model)?;
        out.push_str(&format!(
            "applied {} to {} now:\n  io.cost.qos:   {}\n  io.cost.model: {}\n",
            plan.chosen.name, plan.dev.name, qos, model
        ));
    }
    if let Some(text) = text {
        boot(hp, plan, &text, &mut state, tools, out)?;
    }
    out.push_str(&format!(
        "`resctl-bench apply --undo` puts back what apply changed (kept in {})\n",
        state.path().display()
    ));
    Ok(())
}

/// `--boot`: the file, the hwdb, the re-trigger, and the check that systemd applied it.
fn boot(
    hp: &HostPaths,
    plan: &Plan,
    text: &str,
    state: &mut State,
    tools: &mut dyn Tools,
    out: &mut String,
) -> Result<()> {
    // systemd's tool is about to write both knobs: their values now are what undo restores.
    record_knobs(hp, plan, state)?;
    let path = plan.hwdb_path(hp);
    state.applied.add_file(&path, text);
    state.applied.add_device(&plan.dev.name);
    state.save()?;
    let dir = crate::util::create::parent_dir(&path);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    crate::util::atomic::write_atomic(&path, |w| w.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))?;
    out.push_str(&format!("installed {}\n", path.display()));
    update_hwdb(hp, tools)?;
    let sys = format!("/sys/class/block/{}", plan.dev.name);
    tools.run(
        hp,
        &["udevadm", "trigger", "--action=change", "--settle", &sys],
    )?;
    check_applied(hp, plan)?;
    out.push_str(&format!(
        "systemd's iocost applied {} to {} (udev gives it IOCOST_SOLUTIONS={}); it does so at every boot\n",
        plan.chosen.name, plan.dev.name, plan.chosen.name
    ));
    Ok(())
}

/// After the re-trigger: udev's properties name our solution and the knobs hold its values.
fn check_applied(hp: &HostPaths, plan: &Plan) -> Result<()> {
    let n = super::devnr(&plan.dev);
    let props = udev::properties(hp, n).unwrap_or_default();
    let got = props.get("IOCOST_SOLUTIONS").cloned().unwrap_or_default();
    if got != plan.chosen.name {
        bail!(
            "{} was re-triggered but udev gives it IOCOST_SOLUTIONS={:?}, not {:?}: its hwdb \
             lookup doesn't reach the installed file (`udevadm info /dev/{}` shows what it has)",
            plan.dev.name,
            got,
            plan.chosen.name,
            plan.dev.name
        );
    }
    let (m, q) = (iocost::read_model(hp, n)?, iocost::read_qos(hp, n)?);
    let c = &plan.chosen;
    if !(m.same_params(&c.model) && q.same_params(&c.qos) && q.enable == 1) {
        bail!(
            "udev gives {} the solution {} but io.cost doesn't hold its values (model {:?}, \
             qos {:?}): systemd's iocost didn't apply it (see `journalctl -u systemd-udevd`)",
            plan.dev.name,
            c.name,
            iocost::model_line(n, &m),
            iocost::qos_line(n, &q)
        );
    }
    Ok(())
}

/// Compiles the hwdb and has udevd load it now: by itself it looks for a new hwdb.bin at most
/// every 3 s, so a re-trigger right after the update could still see the old one.
fn update_hwdb(hp: &HostPaths, tools: &mut dyn Tools) -> Result<()> {
    tools.run(hp, &["systemd-hwdb", "update"])?;
    tools.run(hp, &["udevadm", "control", "--reload"])
}

/// `--undo`: removes the files apply wrote (unless changed since), updates the hwdb and
/// re-triggers their disks, then writes the knobs' old values back.
pub fn undo(hp: &HostPaths, tools: &mut dyn Tools, out: &mut String) -> Result<()> {
    let mut state = State::open(hp)?;
    if state.applied.is_empty() {
        out.push_str("nothing to undo: apply has changed nothing here\n");
        return Ok(());
    }
    let files = std::mem::take(&mut state.applied.files);
    for f in &files {
        match std::fs::read_to_string(&f.path) {
            Ok(cur) if cur == f.content => {
                std::fs::remove_file(&f.path)
                    .with_context(|| format!("removing {}", f.path.display()))?;
                out.push_str(&format!("removed {}\n", f.path.display()));
            }
            Ok(_) => out.push_str(&format!(
                "left {} alone: it was changed since apply wrote it\n",
                f.path.display()
            )),
            Err(_) => out.push_str(&format!("{} is gone already\n", f.path.display())),
        }
    }
    state.save()?;
    if !files.is_empty() {
        update_hwdb(hp, tools)?;
        for d in std::mem::take(&mut state.applied.devices) {
            if hp.path("sys/class/block").join(&d).exists() {
                let sys = format!("/sys/class/block/{}", d);
                tools.run(
                    hp,
                    &["udevadm", "trigger", "--action=change", "--settle", &sys],
                )?;
            }
        }
    }
    // The model first: with the QoS's ctrl=auto after it, the kernel takes both back.
    let mut knobs = std::mem::take(&mut state.applied.knobs);
    knobs.sort_by_key(|k| !k.path.ends_with("io.cost.model"));
    for (i, k) in knobs.iter().enumerate() {
        if let Err(e) = write_file(&k.path, &k.old) {
            // What is left stays in the state for the next --undo.
            state.applied.knobs = knobs[i..].to_vec();
            state.save()?;
            return Err(e);
        }
        out.push_str(&format!("{}: {}\n", k.path.display(), k.old));
    }
    state.applied.devices.clear();
    state.save()?;
    Ok(())
}
