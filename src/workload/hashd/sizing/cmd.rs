//! `__hashd-bench`: the sizing bench against a real hashd on this host (no cgroups), printing
//! the result as JSON. A development and calibration aid; the storage and hashd-params benches
//! run the same phases inside their cgroups.

use super::{run, HashdTarget, SizingOpts};
use crate::workload::hashd::{Hashd, HashdOpts, Params};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct HashdBenchArgs {
    /// Work directory (testfiles, params, status)
    #[arg(long = "dir", value_name = "DIR")]
    pub dir: PathBuf,
    /// The 100 % footprint (size, e.g. 2G)
    #[arg(long = "size", value_name = "SIZE")]
    pub size: String,
    /// Sleep instead of hashing (needs --rps-max)
    #[arg(long = "fake-cpu")]
    pub fake_cpu: bool,
    /// Use this rps_max instead of measuring it
    #[arg(long = "rps-max", value_name = "N")]
    pub rps_max: Option<u32>,
    /// Shortened phases
    #[arg(long = "quick")]
    pub quick: bool,
    /// Use the longer probes of rotational devices
    #[arg(long = "rotational")]
    pub rotational: bool,
}

pub fn run_cmd(a: &HashdBenchArgs, global_quick: bool) -> Result<()> {
    let size = crate::units::parse::parse_size(&a.size)
        .map_err(|e| crate::error::UsageError::new(format!("--size {}", e)))?;
    if a.fake_cpu && a.rps_max.is_none() {
        crate::usage_bail!("--fake-cpu needs --rps-max N");
    }
    let opts = SizingOpts::new(a.rps_max, a.fake_cpu, a.quick || global_quick);
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let hopts = HashdOpts::new(&a.dir, size);
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
