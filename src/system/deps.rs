//! `resctl-bench deps`: which system requirements this host satisfies, and why the others are
//! missed. It changes nothing unless `--fix` is given; then it applies the fix pass a run would
//! apply (through the restore journal), reports the outcome and restores every change on exit,
//! so the host is left as it was.
//!
//! Exit status: 0 when every requirement is satisfied (after the fix pass with `--fix`), 1 when
//! any is missed.

use crate::system::blockdev::{self, Scratch};
use crate::system::restore::Journal;
use crate::system::sysreqs::{self, ByHand, Enforce, Evaluation, Host, SysReq};
use crate::system::HostPaths;
use crate::units::format_size;
use anyhow::{anyhow, Result};
use std::fmt::Write;

/// The text `deps` prints; `dir` is the work directory (where a swap file would go).
pub fn render(
    scratch: &std::result::Result<Scratch, String>,
    ev: &Evaluation,
    fixing: bool,
    dir: &std::path::Path,
) -> String {
    let mut out = String::new();
    let r = &ev.report;
    match scratch {
        Ok(s) => {
            let _ = writeln!(
                out,
                "Scratch device: {} ({}:{}) model=\"{}\" firmware=\"{}\" size={} rotational={}",
                r.scr_dev,
                r.scr_devnr.0,
                r.scr_devnr.1,
                r.scr_dev_model,
                r.scr_dev_fwrev,
                format_size(r.scr_dev_size as f64),
                if s.dev.rotational { "yes" } else { "no" }
            );
            let _ = writeln!(out, "                {}", s.how);
            for w in &s.warnings {
                let _ = writeln!(out, "                warning: {}", w);
            }
        }
        Err(e) => {
            let _ = writeln!(out, "Scratch device: none ({})", e);
        }
    }
    let _ = writeln!(
        out,
        "System: kernel=\"{}\" nr_cpus={} memory={} swap={}",
        r.kernel_version,
        r.nr_cpus,
        format_size(r.total_memory as f64),
        format_size(r.total_swap as f64)
    );
    out.push('\n');

    if fixing {
        if ev.fixed.is_empty() {
            out.push_str("Fixed: nothing needed changing\n\n");
        } else {
            out.push_str("Fixed (restored when deps exits):\n");
            for (req, what) in &ev.fixed {
                let _ = writeln!(out, "    {}: {}", req, what);
            }
            out.push('\n');
        }
    }

    for c in &ev.checks {
        let _ = writeln!(
            out,
            "[{}] {:<21} {}",
            if c.satisfied() { " ok " } else { "MISS" },
            c.req.name(),
            c.req.about()
        );
        for m in &c.missed {
            let _ = writeln!(out, "       - {}", m);
        }
        for w in &c.warnings {
            let _ = writeln!(out, "       warning: {}", w);
        }
        if let (false, Some(todo)) = (c.satisfied(), c.by_hand) {
            by_hand(&mut out, todo, dir);
        }
        if let (false, false, Some(fix)) = (c.satisfied(), fixing, &c.fix) {
            let _ = writeln!(
                out,
                "       run fixes this ({}) unless passive={}; `deps --fix` tries it",
                fix,
                fix.res.name()
            );
        }
    }
    let missed = ev.missed().count();
    let _ = writeln!(
        out,
        "\n{} of {} requirements satisfied",
        ev.checks.len() - missed,
        ev.checks.len()
    );
    out
}

/// How to do `todo` by hand, indented under its requirement.
fn by_hand(out: &mut String, todo: ByHand, dir: &std::path::Path) {
    match todo {
        ByHand::AddSwap { bytes } => {
            let gib = bytes.div_ceil(1 << 30);
            let f = dir.join("swapfile");
            let f = f.display();
            let _ = writeln!(
                out,
                "       add swap by hand, e.g. a swap file of {gib}G on the scratch device (in --dir):\n\
                 \x20        mkdir -p {dir} && fallocate -l {gib}G {f} && chmod 600 {f} && mkswap {f} && swapon {f}\n\
                 \x20        (on btrfs: btrfs filesystem mkswapfile --size {gib}G {f}, then swapon {f};\n\
                 \x20        add it to /etc/fstab to keep it after a reboot)",
                dir = dir.display(),
            );
        }
    }
}

/// `deps [--fix]` on the real host, for the work directory `dir` (and `--dev`).
pub fn deps_cmd(dir: &std::path::Path, dev: Option<&str>, fix: bool) -> Result<()> {
    let hp = crate::system::cgroup::managed(HostPaths::real());
    let scratch = blockdev::detect(&hp, dir, dev).map_err(|e| {
        if e.downcast_ref::<crate::error::UsageError>().is_some() {
            Err(e)
        } else {
            Ok(format!("{:#}", e))
        }
    });
    let scratch = match scratch {
        Ok(s) => Ok(s),
        Err(Err(usage)) => return Err(usage),
        Err(Ok(msg)) => Err(msg),
    };
    let journal = if fix {
        let j = Journal::open_on(dir, &hp)?;
        j.install_signal_handlers()?;
        Some(j)
    } else {
        None
    };
    let host = Host {
        hp: &hp,
        scratch: scratch.as_ref().map_err(|e| e.clone()),
    };
    let ev = sysreqs::evaluate(&host, Enforce::all(), journal.as_ref())?;
    crate::util::out::out_text(&render(&scratch, &ev, fix, dir));
    if let Some(j) = journal {
        let n = j.changes().len();
        if n > 0 {
            crate::util::out::out_text(&format!("Restoring the {} change(s) made by --fix\n", n));
        }
        j.restore_all()?;
    }
    let missed: Vec<&str> = ev.missed().map(|c| c.req.name()).collect();
    if missed.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "{} of {} system requirements missed: {}",
            missed.len(),
            SysReq::ALL.len(),
            missed.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::blockdev::testutil::put;
    use crate::system::sysreqs::testhost::good_host;

    fn rendered(hp: &HostPaths, fix: bool) -> String {
        let s = blockdev::detect(hp, std::path::Path::new("/x"), Some("nvme0n1"))
            .map_err(|e| e.to_string());
        let host = Host {
            hp,
            scratch: s.as_ref().map_err(|e| e.clone()),
        };
        let journal = if fix {
            Some(Journal::open(&hp.path("work")).unwrap())
        } else {
            None
        };
        let ev = sysreqs::evaluate(&host, Enforce::all(), journal.as_ref()).unwrap();
        render(&s, &ev, fix, std::path::Path::new("/var/lib/resctl-demo"))
            .replace(&hp.root.to_string_lossy().to_string(), "")
    }

    #[test]
    fn deps_output_lists_every_requirement() {
        let (_t, hp) = good_host();
        put(
            &hp.path("sys/block/nvme0n1/queue/scheduler"),
            "[mq-deadline] none\n",
        );
        put(&hp.path("proc/vmstat"), "pgscan_file 1\n");
        let text = rendered(&hp, false);
        for r in SysReq::ALL {
            assert!(text.contains(r.name()), "{} missing:\n{}", r, text);
        }
        insta::assert_snapshot!("deps_report", text);
    }

    #[test]
    fn deps_fix_output() {
        let (_t, hp) = good_host();
        put(
            &hp.path("sys/block/nvme0n1/queue/scheduler"),
            "[mq-deadline] none\n",
        );
        put(&hp.path("proc/sys/vm/swappiness"), "10\n");
        let text = rendered(&hp, true);
        assert!(
            text.contains("Fixed (restored when deps exits):"),
            "{}",
            text
        );
        assert!(text.contains("14 of 14 requirements satisfied"), "{}", text);
        insta::assert_snapshot!("deps_fix_report", text);
        // Restored when the journal went away.
        assert_eq!(
            std::fs::read_to_string(hp.path("proc/sys/vm/swappiness")).unwrap(),
            "10"
        );
    }

    #[test]
    fn too_little_swap_says_how_to_add_it() {
        let (_t, hp) = good_host();
        // 16 GiB of memory, 1 GiB of swap: 30 % is 4.8G, so 3.8G (4G rounded up) more.
        put(
            &hp.path("proc/meminfo"),
            &format!(
                "MemTotal: {} kB\nSwapTotal: {} kB\nSwapFree: {} kB\n",
                16 << 20,
                1 << 20,
                1 << 20
            ),
        );
        let text = rendered(&hp, false);
        assert!(
            text.contains(
                "a swap file of 4G on the scratch device (in --dir):\n         \
                 mkdir -p /var/lib/resctl-demo && fallocate -l 4G /var/lib/resctl-demo/swapfile"
            ),
            "{}",
            text
        );
        assert!(
            text.contains("swapon /var/lib/resctl-demo/swapfile"),
            "{}",
            text
        );
        // Enough swap: no such advice.
        let (_t, hp) = good_host();
        assert!(!rendered(&hp, false).contains("swapfile"));
    }
}
