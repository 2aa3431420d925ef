//! The persistent argument file (`-a/--args FILE`): a JSON object remembering the global options
//! that configure a run, the subcommand and its job specs, so a long series of invocations can be
//! repeated or continued with just `-a FILE SUBCOMMAND`.
//!
//! Stored keys: `dir dev rep_retention mem_profile mem_avail mem_margin iocost_qos swappiness
//! hashd_size hashd_cpu_load mode job_specs`. Option values may be written as
//! JSON numbers/`null` or as strings in the command-line syntax (`"7D"`, `"16G"`, `"off"`);
//! `iocost_qos` may also be an object of QoS keys. `job_specs` holds spec strings or spec objects
//! (`{kind, id, passive, props}`). Upstream's key names (`hashd_fake_cpu_load` as true/false,
//! `iocost_qos_ovr`, `swappiness_ovr`) are read too; upstream's options for what this version
//! doesn't have (`linux_tar` for build sideloads, `systemd_timeout`) are accepted and dropped.
//!
//! Flow: `load` reads the file (a missing or empty file holds nothing); `Config::from_opts`
//! validates the file's values (errors name the file) and then the command line over them, so
//! the command line wins. Once the job specs are known, `save` writes the effective values back
//! atomically, only when they differ from what the file holds. Per-invocation switches
//! (`--result`, `--force`, `--quick`, …) are never stored.

use super::{Config, QosOverride};
use crate::cli::GlobalOpts;
use crate::error::UsageError;
use crate::spec::JobSpec;
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest args file we read (real ones are well under a KB).
const MAX_ARGS_BYTES: u64 = 16 << 20;

/// The subcommands a stored `mode` may name (upstream's, lower-cased; upstream writes `Run`).
const MODES: &[&str] = &[
    "run", "study", "solve", "format", "summary", "pack", "merge", "deps", "doc", "upload",
];

/// The keys an args file may hold (upstream's names are accepted as aliases, see `canonical_key`).
const KEYS: &[&str] = &[
    "dir",
    "dev",
    "rep_retention",
    "mem_profile",
    "mem_avail",
    "mem_margin",
    "iocost_qos",
    "swappiness",
    "hashd_size",
    "hashd_cpu_load",
    "mode",
    "job_specs",
];

fn canonical_key(key: &str) -> Option<&'static str> {
    match key {
        "iocost_qos_ovr" => Some("iocost_qos"),
        "swappiness_ovr" => Some("swappiness"),
        "hashd_fake_cpu_load" => Some("hashd_cpu_load"),
        _ => KEYS.iter().copied().find(|k| *k == key),
    }
}

/// Upstream's keys for options this version doesn't have; a file may hold them (upstream
/// writes them all), they are dropped.
const DROPPED_KEYS: &[&str] = &["linux_tar", "linux", "systemd_timeout"];

/// The stored options in command-line syntax (what `GlobalOpts` carries), by key; a key
/// that isn't there is not stored.
type StoredOpts = BTreeMap<&'static str, String>;

/// The options the file tracks, by key, and where each sits in the command line's options:
/// the one list that loading, overlaying and clearing go through.
fn tracked(o: &mut GlobalOpts) -> [(&'static str, &mut Option<String>); 10] {
    [
        ("dir", &mut o.dir),
        ("dev", &mut o.dev),
        ("rep_retention", &mut o.rep_retention),
        ("mem_profile", &mut o.mem_profile),
        ("mem_avail", &mut o.mem_avail),
        ("mem_margin", &mut o.mem_margin),
        ("iocost_qos", &mut o.iocost_qos),
        ("swappiness", &mut o.swappiness),
        ("hashd_size", &mut o.hashd_size),
        ("hashd_cpu_load", &mut o.hashd_cpu_load),
    ]
}

/// An args file as loaded.
#[derive(Debug, Clone)]
pub struct ArgsFile {
    path: PathBuf,
    /// Whether the file existed with content.
    existed: bool,
    opts: StoredOpts,
    /// Subcommand name (`run`, `study`, `solve`; upstream's `Run` etc. are lower-cased).
    mode: Option<String>,
    /// Stored specs as text; canonical where they parse.
    job_specs: Vec<String>,
    /// What the file holds, normalized like `save` writes it; `None` if it can't be (missing
    /// file, or a stored value the command line overrode is invalid), which forces a save.
    normalized: Option<Value>,
}

/// What `save` writes, in this key order.
#[derive(Serialize)]
struct Written {
    dir: String,
    dev: Option<String>,
    rep_retention: u64,
    /// GiB, or `"off"`.
    mem_profile: Value,
    mem_avail: Option<u64>,
    mem_margin: f64,
    iocost_qos: Option<String>,
    swappiness: Option<u32>,
    hashd_size: Option<u64>,
    /// `"fake"` or `"real"`; `None` = keep.
    hashd_cpu_load: Option<&'static str>,
    mode: Option<String>,
    job_specs: Vec<String>,
}

impl Written {
    /// For comparisons (key order doesn't matter there).
    fn value(&self) -> Result<Value> {
        serde_json::to_value(self).context("serializing the args file")
    }
}

fn written(cfg: &Config, mode: Option<&str>, job_specs: &[String]) -> Written {
    Written {
        dir: cfg.dir.to_string_lossy().into_owned(),
        dev: cfg.dev.clone(),
        rep_retention: cfg.rep_retention,
        mem_profile: match cfg.mem_profile {
            Some(n) => Value::from(n),
            None => Value::from("off"),
        },
        mem_avail: cfg.mem_avail,
        mem_margin: cfg.mem_margin,
        iocost_qos: cfg.iocost_qos.as_ref().map(qos_text),
        swappiness: cfg.swappiness,
        hashd_size: cfg.hashd_size,
        hashd_cpu_load: cfg
            .hashd_fake_cpu_load
            .map(|f| if f { "fake" } else { "real" }),
        mode: mode.map(str::to_string),
        job_specs: job_specs.to_vec(),
    }
}

/// `--iocost-qos` text of an override (`min=max` is written as `vrate`).
fn qos_text(q: &QosOverride) -> String {
    let mut parts = Vec::new();
    let mut f = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{}={}", k, v));
        }
    };
    f("rpct", q.rpct.map(|v| v.to_string()));
    f("rlat", q.rlat.map(|v| v.to_string()));
    f("wpct", q.wpct.map(|v| v.to_string()));
    f("wlat", q.wlat.map(|v| v.to_string()));
    if q.min.is_some() && q.min == q.max {
        f("vrate", q.min.map(|v| v.to_string()));
    } else {
        f("min", q.min.map(|v| v.to_string()));
        f("max", q.max.map(|v| v.to_string()));
    }
    parts.join(",")
}

/// One stored option value in command-line syntax; `Err` is the reason it's unusable.
fn option_text(key: &str, v: &Value) -> Result<Option<String>, String> {
    let numeric = matches!(
        key,
        "rep_retention" | "mem_profile" | "mem_avail" | "mem_margin" | "swappiness" | "hashd_size"
    );
    match v {
        Value::Null if key == "mem_profile" => Ok(Some("off".into())),
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        // Upstream stored `hashd_fake_cpu_load` as a bool.
        Value::Bool(b) if key == "hashd_cpu_load" => {
            Ok(Some(if *b { "fake" } else { "real" }.to_string()))
        }
        Value::Number(n) if numeric => Ok(Some(n.to_string())),
        Value::Object(o) if key == "iocost_qos" => {
            let mut parts = Vec::new();
            for (k, v) in o {
                match (k.as_str(), v) {
                    (_, Value::Null) | ("off", Value::Bool(false)) => {}
                    ("off", _) => {
                        return Err("\"off\" can't be stored; remove iocost_qos instead".into())
                    }
                    (_, Value::Number(n)) => parts.push(format!("{}={}", k, n)),
                    (_, Value::String(s)) => parts.push(format!("{}={}", k, s)),
                    _ => return Err(format!("{} must be a number", k)),
                }
            }
            Ok(Some(parts.join(",")).filter(|s| !s.is_empty()))
        }
        _ => Err(match key {
            "iocost_qos" => "expected \"K=V,...\", an object of QoS keys, or null".into(),
            "hashd_cpu_load" => "expected \"keep\", \"fake\", \"real\", true, false or null".into(),
            _ if numeric => "expected a number, a string in the option's syntax, or null".into(),
            _ => "expected a string or null".into(),
        }),
    }
}

impl ArgsFile {
    /// Reads `path`. A missing or empty file holds nothing and is created by `save`. Anything
    /// unusable is a `UsageError` naming the file.
    pub fn load(path: &Path) -> Result<ArgsFile> {
        let bad = |msg: String| UsageError::new(format!("args file {}: {}", path.display(), msg));
        let mut file = ArgsFile {
            path: path.to_path_buf(),
            existed: false,
            opts: StoredOpts::default(),
            mode: None,
            job_specs: Vec::new(),
            normalized: None,
        };
        let Some(f) = crate::result::read::open_regular(path, "args file")? else {
            // It will be created: find a bad directory now, not after the jobs ran.
            crate::result::save::check_dir_writable(path, "args file")?;
            return Ok(file);
        };
        let bytes = crate::result::read::read_limited(f, path, "args file", MAX_ARGS_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))?;
        if text.trim().is_empty() {
            return Ok(file);
        }
        file.existed = true;
        let json: Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON ({})", e)))?;
        let Value::Object(map) = json else {
            return Err(bad(
                "expected a JSON object like {\"dir\": ..., \"job_specs\": [...]}".into(),
            )
            .into());
        };
        file.read_keys(&map).map_err(bad)?;
        Ok(file)
    }

    fn read_keys(&mut self, map: &Map<String, Value>) -> Result<(), String> {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for (raw_key, v) in map {
            if DROPPED_KEYS.contains(&raw_key.as_str()) {
                log::debug!(
                    "args file: dropping {:?} (not an option of this version)",
                    raw_key
                );
                continue;
            }
            let Some(key) = canonical_key(raw_key) else {
                return Err(format!(
                    "unknown key {:?} (accepted: {})",
                    raw_key,
                    KEYS.join(", ")
                ));
            };
            // An alias next to its canonical key: one would silently win over the other.
            if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
                return Err(format!(
                    "{:?} and {:?} are the same option; keep one of them",
                    other, raw_key
                ));
            }
            seen.push((key, raw_key));
            let keyed = |e: String| format!("{}: {}", raw_key, e);
            match key {
                "mode" => {
                    self.mode = match v {
                        Value::Null => None,
                        Value::String(s) if MODES.contains(&s.to_lowercase().as_str()) => {
                            Some(s.to_lowercase())
                        }
                        _ => {
                            return Err(keyed(format!(
                                "{} is not a subcommand (accepted: {})",
                                v,
                                MODES.join(", ")
                            )))
                        }
                    };
                    continue;
                }
                "job_specs" => {
                    let list = match v {
                        Value::Null => Vec::new(),
                        Value::Array(a) => a.clone(),
                        _ => return Err(keyed("expected a list of job specs".into())),
                    };
                    self.job_specs = list
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let text = crate::spec::spec_text(v)
                                .map_err(|e| format!("job_specs[{}] {}", i, e))?;
                            Ok(JobSpec::parse(&text).map_or(text, |s| s.canonical()))
                        })
                        .collect::<Result<_, String>>()?;
                    continue;
                }
                _ => {}
            }
            match option_text(key, v).map_err(keyed)? {
                Some(text) => self.opts.insert(key, text),
                None => self.opts.remove(key),
            };
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `base` with each stored option put where `keep` says the command line didn't give one.
    fn overlay(&self, base: &GlobalOpts, keep_argv: bool) -> GlobalOpts {
        let mut o = base.clone();
        for (key, slot) in tracked(&mut o) {
            if !(keep_argv && slot.is_some()) {
                *slot = self.opts.get(key).cloned();
            }
        }
        o
    }

    /// The command line's options over this file's: the file's values are validated first
    /// (those the command line doesn't override; errors name the file), then the merge.
    pub fn into_config(mut self, argv: &GlobalOpts) -> Result<Config> {
        let mut not_overridden = self.clone();
        for (key, given) in tracked(&mut argv.clone()) {
            if given.is_some() {
                not_overridden.opts.remove(key);
            }
        }
        Config::validate(&not_overridden.overlay(argv, false))
            .map_err(|e| UsageError::new(format!("args file {}: {:#}", self.path.display(), e)))?;
        if self.existed {
            self.normalized = Config::validate(&self.overlay(argv, false))
                .ok()
                .and_then(|c| {
                    written(&c, self.mode.as_deref(), &self.job_specs)
                        .value()
                        .ok()
                });
        }
        let mut cfg = Config::validate(&self.overlay(argv, true))?;
        cfg.args_file = Some(self);
        Ok(cfg)
    }

    /// The stored specs, when they were stored by `mode`.
    pub fn specs_for(&self, mode: &str) -> Option<&[String]> {
        (self.mode.as_deref() == Some(mode) && !self.job_specs.is_empty())
            .then_some(self.job_specs.as_slice())
    }

    /// Writes the effective options of `cfg` (and `mode` with its `specs`, if given; otherwise
    /// the stored ones stay) back, atomically and only if that changes what the file holds.
    pub fn save(&self, cfg: &Config, session: Option<(&str, &[JobSpec])>) -> Result<()> {
        let (mode, specs) = match session {
            Some((mode, specs)) => (
                Some(mode),
                specs.iter().map(JobSpec::canonical).collect::<Vec<_>>(),
            ),
            None => (self.mode.as_deref(), self.job_specs.clone()),
        };
        let new = written(cfg, mode, &specs);
        if self.normalized.as_ref() == Some(&new.value()?) {
            log::debug!("args file {}: unchanged", self.path.display());
            return Ok(());
        }
        let mut text = serde_json::to_string_pretty(&new).context("serializing the args file")?;
        text.push('\n');
        crate::util::atomic::write_atomic(&self.path, |w| w.write_all(text.as_bytes()))
            .with_context(|| format!("saving args file {}", self.path.display()))?;
        log::info!(
            "args file {}: {}",
            self.path.display(),
            if self.existed { "updated" } else { "created" }
        );
        Ok(())
    }
}

/// The job specs of a `run`/`study`/`solve` (`mode`) invocation: from `-f` files and the
/// command line; without any, the args file's when it stored them for the same subcommand.
/// Then the args file (if any) is saved with them.
pub fn collect_job_specs<T>(
    cfg: &Config,
    mode: &str,
    args: &crate::cli::SpecArgs,
    validate: fn(&JobSpec) -> Result<T, UsageError>,
) -> Result<Vec<(JobSpec, T)>> {
    let Some(file) = &cfg.args_file else {
        return crate::spec::collect_specs(&args.file, &args.specs, validate);
    };
    let mut specs = crate::spec::gather_specs(&args.file, &args.specs, validate)?;
    if specs.is_empty() {
        if let Some(stored) = file.specs_for(mode) {
            for text in stored {
                let checked = JobSpec::parse(text)
                    .and_then(|s| validate(&s).map(|t| (s, t)))
                    .map_err(|e| {
                        UsageError::new(format!("args file {}: {}", file.path.display(), e))
                    })?;
                specs.push(checked);
            }
            log::info!(
                "args file {}: using the job specs stored by `{}`: {}",
                file.path.display(),
                mode,
                stored.join(" ")
            );
        }
    }
    if specs.is_empty() {
        return Err(crate::spec::no_specs_error(Some(&file.path)).into());
    }
    let texts: Vec<JobSpec> = specs.iter().map(|(s, _)| s.clone()).collect();
    file.save(cfg, Some((mode, &texts)))?;
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> GlobalOpts {
        GlobalOpts::parse_alone(args).unwrap()
    }

    fn file_with(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("args.json");
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn stored_values_fill_in_and_argv_wins() {
        let (_d, p) = file_with(
            r#"{"dir": "/x", "rep_retention": "1D", "mem_profile": null, "mem_avail": 0,
                "swappiness": 10, "iocost_qos": {"rpct": 95, "min": 50, "max": 60, "off": false},
                "mode": "Run", "job_specs": [{"kind": "storage", "id": "a", "passive": null,
                "props": [{"loops": "2"}]}]}"#,
        );
        let af = ArgsFile::load(&p).unwrap();
        assert_eq!(
            af.specs_for("run"),
            Some(&["storage:id=a,loops=2".to_string()][..])
        );
        assert_eq!(af.specs_for("study"), None);
        let cfg = af.into_config(&opts(&["--swappiness", "20"])).unwrap();
        assert_eq!(cfg.dir, PathBuf::from("/x"));
        assert_eq!(cfg.rep_retention, 86400);
        assert_eq!(cfg.mem_profile, None);
        assert_eq!(cfg.mem_avail, None);
        assert_eq!(cfg.swappiness, Some(20));
        let q = cfg.iocost_qos.unwrap();
        assert_eq!((q.rpct, q.min, q.max), (Some(95.0), Some(50.0), Some(60.0)));
    }

    #[test]
    fn upstream_keys_of_options_we_lack_are_dropped() {
        let (_d, p) = file_with(
            r#"{"dir": "/x", "linux_tar": "", "systemd_timeout": 120.0, "hashd_size": null,
                "hashd_fake_cpu_load": null, "mode": "Run", "job_specs": []}"#,
        );
        let cfg = ArgsFile::load(&p).unwrap().into_config(&opts(&[])).unwrap();
        assert_eq!(cfg.dir, PathBuf::from("/x"));
        assert_eq!((cfg.hashd_size, cfg.hashd_fake_cpu_load), (None, None));
        let v = written(&cfg, Some("run"), &[]).value().unwrap();
        for key in DROPPED_KEYS {
            assert!(v.get(key).is_none(), "{} is written", key);
        }
        // They alone don't make the file differ from what a save would write.
        assert_eq!(cfg.args_file.unwrap().normalized, Some(v));
    }

    #[test]
    fn hashd_overrides_are_stored_and_read_in_upstream_spelling_too() {
        for (text, size, fake) in [
            (
                r#"{"hashd_size": 2147483648, "hashd_fake_cpu_load": true}"#,
                Some(2u64 << 30),
                Some(true),
            ),
            (
                r#"{"hashd_size": "512M", "hashd_fake_cpu_load": false}"#,
                Some(512 << 20),
                Some(false),
            ),
            (r#"{"hashd_cpu_load": "keep"}"#, None, None),
            (r#"{"hashd_cpu_load": "fake"}"#, None, Some(true)),
        ] {
            let (_d, p) = file_with(text);
            let cfg = ArgsFile::load(&p).unwrap().into_config(&opts(&[])).unwrap();
            assert_eq!(
                (cfg.hashd_size, cfg.hashd_fake_cpu_load),
                (size, fake),
                "{}",
                text
            );
        }
        // The command line wins, and what is saved reads back the same.
        let (_d, p) = file_with(r#"{"hashd_size": "512M", "hashd_cpu_load": "fake"}"#);
        let cfg = ArgsFile::load(&p)
            .unwrap()
            .into_config(&opts(&["--hashd-size", "1G", "--hashd-cpu-load", "real"]))
            .unwrap();
        assert_eq!(
            (cfg.hashd_size, cfg.hashd_fake_cpu_load),
            (Some(1 << 30), Some(false))
        );
        let v = written(&cfg, None, &[]).value().unwrap();
        assert_eq!(
            (&v["hashd_size"], &v["hashd_cpu_load"]),
            (&Value::from(1u64 << 30), &Value::from("real"))
        );
        let (_d2, p2) = file_with(&v.to_string());
        let back = ArgsFile::load(&p2)
            .unwrap()
            .into_config(&opts(&[]))
            .unwrap();
        assert_eq!(
            (back.hashd_size, back.hashd_fake_cpu_load),
            (Some(1 << 30), Some(false))
        );
        // Bad stored values: one line naming the file and what is accepted.
        for (text, want) in [
            (
                r#"{"hashd_cpu_load": "maybe"}"#,
                "accepted: keep, fake, real",
            ),
            (r#"{"hashd_size": "1K"}"#, "smaller than a page"),
        ] {
            let (_d, p) = file_with(text);
            let e = ArgsFile::load(&p)
                .unwrap()
                .into_config(&opts(&[]))
                .unwrap_err();
            let msg = format!("{:#}", e);
            assert!(
                msg.starts_with("args file ") && msg.contains(want),
                "{}",
                msg
            );
        }
    }

    #[test]
    fn bad_stored_value_names_the_file_unless_overridden() {
        let (_d, p) = file_with(r#"{"swappiness": 300}"#);
        let e = ArgsFile::load(&p)
            .unwrap()
            .into_config(&opts(&[]))
            .unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        let msg = format!("{:#}", e);
        assert!(
            msg.starts_with("args file ") && msg.contains("from 0 to 200"),
            "{}",
            msg
        );
        let cfg = ArgsFile::load(&p)
            .unwrap()
            .into_config(&opts(&["--swappiness", "60"]))
            .unwrap();
        assert_eq!(cfg.swappiness, Some(60));
    }

    #[test]
    fn malformed_files_are_usage_errors() {
        for (text, want) in [
            ("{", "not valid JSON"),
            ("[1]", "expected a JSON object"),
            (r#"{"swapiness": 1}"#, "unknown key \"swapiness\""),
            (r#"{"dir": 1}"#, "dir: expected a string"),
            (r#"{"job_specs": "x"}"#, "job_specs: expected a list"),
            (r#"{"job_specs": [1]}"#, "job_specs[0]"),
            (r#"{"iocost_qos": {"off": true}}"#, "iocost_qos: \"off\""),
            // An alias used to silently override its canonical key; a bad mode was kept.
            (
                r#"{"swappiness": 10, "swappiness_ovr": 20}"#,
                "\"swappiness\" and \"swappiness_ovr\" are the same option",
            ),
            (
                r#"{"mode": "bogus"}"#,
                "mode: \"bogus\" is not a subcommand",
            ),
            (r#"{"mode": 3}"#, "mode: 3 is not a subcommand"),
            (
                r#"{"hashd_cpu_load": 3}"#,
                "hashd_cpu_load: expected \"keep\"",
            ),
        ] {
            let (_d, p) = file_with(text);
            let e = ArgsFile::load(&p).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
            let msg = format!("{:#}", e);
            assert!(msg.contains(want), "{}: {}", text, msg);
            assert!(!msg.contains('\n'), "{}", msg);
        }
    }

    #[test]
    fn written_round_trips_without_change() {
        let cfg = Config::from_opts(&opts(&[
            "-d",
            "/y",
            "-M",
            "off",
            "--iocost-qos",
            "rpct=95.5,vrate=70",
        ]))
        .unwrap();
        let specs = vec!["selftest:steps=2".to_string()];
        let v = written(&cfg, Some("run"), &specs).value().unwrap();
        let (_d, p) = file_with(&serde_json::to_string(&v).unwrap());
        let af = ArgsFile::load(&p).unwrap();
        let cfg2 = af.into_config(&opts(&[])).unwrap();
        let af = cfg2.args_file.as_ref().unwrap();
        assert_eq!(af.normalized.as_ref(), Some(&v));
        assert_eq!(written(&cfg2, Some("run"), &specs).value().unwrap(), v);
        assert_eq!(v["iocost_qos"], "rpct=95.5,vrate=70");
        assert_eq!(v["mem_profile"], "off");
    }
}
