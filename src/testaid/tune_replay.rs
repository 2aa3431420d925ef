//! `__tune-replay FILE...`: the adaptive vrate grid (`iocost_tune::adaptive`) replayed on
//! full-grid results. A configuration the procedure asks for is the file's data at that vrate,
//! revealed only then; the candidates are the file's measured vrates. Per file one JSON line:
//! the vrates measured in order, why it stopped, the solutions and their intervals from those
//! configurations and from the whole grid. `scripts/tune-replay` sums them up.

use crate::bench::iocost_tune::adaptive::{next, Adaptive, Next};
use crate::bench::iocost_tune::interval::{
    configs, only_at, spreads, BootOpts, SolutionSpread, DFL_BOOT,
};
use crate::cli::testaid::TuneReplayArgs;
use anyhow::Result;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

fn solutions(sp: &BTreeMap<String, SolutionSpread>) -> Value {
    let mut m = Map::new();
    for (name, s) in sp {
        m.insert(
            name.clone(),
            json!({
                "vrate_min": s.vrate.0, "vrate_max": s.vrate.1,
                "vrate_min_lo": s.vrate_min.lo, "vrate_min_hi": s.vrate_min.hi,
                "vrate_max_lo": s.vrate_max.lo, "vrate_max_hi": s.vrate_max.hi,
                "unstable": s.unstable(),
            }),
        );
    }
    Value::Object(m)
}

fn one(path: &Path, plan: Adaptive, boot: BootOpts) -> Result<Value> {
    let (res, props) = super::tune_check::load(path)?;
    let candidates = configs(&res.data);
    let mut measured: Vec<f64> = Vec::new();
    let mut whys = Vec::new();
    let stop = loop {
        let seen = only_at(&res, &|x| measured.iter().any(|m| (m - x).abs() < 1e-9));
        let step = next(
            &candidates,
            &measured,
            &seen,
            &props.rules,
            props.scale,
            plan,
            boot,
        );
        match step {
            Next::Measure { vrate, why } => {
                measured.push(vrate);
                whys.push(why);
            }
            Next::Stop { why } => break why,
        }
    };
    let seen = only_at(&res, &|x| measured.iter().any(|m| (m - x).abs() < 1e-9));
    Ok(json!({
        "file": path.display().to_string(),
        "configs": measured,
        "why": whys,
        "stop": stop,
        "full_configs": candidates.len(),
        "solutions": solutions(&spreads(&seen, &props.rules, props.scale, boot)),
        "full_solutions": solutions(&spreads(&res, &props.rules, props.scale, DFL_BOOT)),
    }))
}

pub fn run(a: &TuneReplayArgs) -> Result<()> {
    let plan = Adaptive {
        coarse: a.coarse,
        budget: a.budget,
        target: a.target,
    };
    let boot = BootOpts {
        seed: a.seed.unwrap_or(DFL_BOOT.seed),
        ..DFL_BOOT
    };
    for f in &a.files {
        match one(f, plan, boot) {
            Ok(v) => println!("{}", v),
            Err(e) => eprintln!("{:#}", e),
        }
    }
    Ok(())
}
