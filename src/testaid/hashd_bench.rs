//! `__hashd-bench`: the sizing bench against a real hashd on this host (no cgroups), printing
//! the result as JSON. A development and calibration aid; the storage and hashd-params benches
//! run the same phases inside their cgroups. The work directory is the global `--dir` (given
//! explicitly), quick mode the global `--quick`.

use crate::cli::testaid::HashdBenchArgs;
use crate::workload::hashd::sizing::{run, HashdTarget, SizingOpts};
use crate::workload::hashd::{Hashd, HashdOpts, Params};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub fn run_cmd(a: &HashdBenchArgs, global: &crate::cli::GlobalOpts) -> Result<()> {
    let dir = match global.dir.as_deref() {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => crate::usage_bail!("__hashd-bench needs --dir DIR (testfiles go there)"),
    };
    let size = crate::units::parse::parse_size(&a.size)
        .map_err(|e| crate::error::UsageError::new(format!("--size {}", e)))?;
    if a.fake_cpu && a.rps_max.is_none() {
        crate::usage_bail!("--fake-cpu needs --rps-max N");
    }
    let opts = SizingOpts::new(a.rps_max, a.fake_cpu, global.quick);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let hopts = HashdOpts::new(&dir, size);
    let base = Params {
        fake_cpu_load: a.fake_cpu,
        ..Params::default()
    };
    base.save(&hopts.params)?;
    let started = Instant::now();
    Hashd::prepare(&hopts)?;
    let prep_secs = started.elapsed().as_secs_f64();
    let mut hashd = Hashd::start(&hopts, None)?;
    hashd.wait_running(Duration::from_secs(60))?;
    let mut target = HashdTarget::new(hashd, base, size, a.rotational);
    let res = run(&mut target, &opts)?;
    target.hashd.stop()?;
    let mut v = serde_json::to_value(&res)?;
    v["prep_secs"] = serde_json::json!(prep_secs);
    v["wall_secs"] = serde_json::json!(started.elapsed().as_secs_f64());
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}
