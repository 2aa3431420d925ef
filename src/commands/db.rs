//! `db import DB FILE...`: result files filed in a database in the community's layout;
//! `db build DB --out DIR`: the database's per-model merges and the hwdb file systemd reads.

use super::shared::LOG;
use anyhow::Result;
use std::path::PathBuf;

/// Keep a database of iocost-tune results laid out as the iocost-benchmark community's
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: DbCmd,
}

#[derive(Debug, clap::Subcommand)]
pub enum DbCmd {
    /// Check result files as the community checks submissions and file each under
    /// DB/<major.minor>/<model>/result-<md5>.json.gz (DB is made when missing)
    Import {
        /// The database folder
        #[arg(value_name = "DB")]
        db: PathBuf,
        /// The result files (gzip or plain)
        #[arg(value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
    },
    /// Merge each model's results (and its newest firmware's apart), pick one merge per model
    /// and write the merges, hwdb inputs, pictures and 90-iocost-tune.hwdb into DIR
    Build {
        /// The database folder
        #[arg(value_name = "DB")]
        db: PathBuf,
        /// The folder for the build (made, or replaced whole when it holds an earlier build)
        #[arg(long = "out", value_name = "DIR", required = true)]
        out: PathBuf,
        /// Use this version's merge for a model instead of the one with the most data points
        /// (repeatable)
        #[arg(long = "pick", value_name = "MODEL=VERSION")]
        pick: Vec<String>,
        /// Model folders built at once (default: the CPUs)
        #[arg(short = 'j', long = "jobs", value_name = "N")]
        jobs: Option<usize>,
    },
}

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

pub fn exec(_g: &super::shared::Globals, a: Args) -> Result<()> {
    match a.cmd {
        DbCmd::Import { db, files } => import(&db, &files),
        DbCmd::Build { db, out, pick, jobs } => build(&db, &out, &pick, jobs),
    }
}

/// The build's time: `SOURCE_DATE_EPOCH` when set (reproducible builds' convention: two builds
/// of one database are then the same bytes), else now.
fn build_time() -> Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.trim().parse().map_err(|_| {
            crate::error::UsageError::new(format!(
                "SOURCE_DATE_EPOCH={:?}: not a number of seconds since 1970",
                v
            ))
            .into()
        }),
        Err(_) => Ok(crate::util::now()),
    }
}

fn build(db: &std::path::Path, out: &std::path::Path, pick: &[String], jobs: Option<usize>) -> Result<()> {
    let mut picks = std::collections::BTreeMap::new();
    for p in pick {
        let Some((m, v)) = p.split_once('=').filter(|(m, v)| !m.is_empty() && !v.is_empty()) else {
            crate::usage_bail!("--pick {:?}: expected MODEL=VERSION (e.g. Samsung_SSD_970_PRO_512GB=2.2)", p);
        };
        picks.insert(m.to_string(), v.to_string());
    }
    if jobs == Some(0) {
        crate::usage_bail!("--jobs 0: give at least 1");
    }
    let opts = crate::db::pipeline::BuildOpts {
        picks,
        now: build_time()?,
        jobs: jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    };
    let s = crate::db::pipeline::run(db, out, &opts)?;
    for n in &s.notes {
        crate::errln!("note: {}", n);
    }
    crate::util::out::out_text(&s.table);
    if s.failed > 0 {
        crate::usage_bail!(
            "db build: {} model folder(s) failed (the table says why); the others are in {}",
            s.failed,
            out.display()
        );
    }
    Ok(())
}

/// One line per file on stdout (filed, or already there) or stderr (refused, and why); a
/// refused file doesn't stop the others, but the exit status says there was one.
fn import(db: &std::path::Path, files: &[PathBuf]) -> Result<()> {
    use crate::db::import::Outcome;
    let dir = crate::db::open(db, true)?;
    let now = crate::util::now();
    let (mut new, mut there, mut refused) = (0, 0, 0);
    for f in files {
        match crate::db::import::import(&dir, f, now) {
            Outcome::Imported(p) => {
                new += 1;
                crate::util::out::out_text(&format!("imported {}: {}\n", f.display(), p.display()));
            }
            Outcome::AlreadyThere(p) => {
                there += 1;
                crate::util::out::out_text(&format!(
                    "already there {}: {}\n",
                    f.display(),
                    p.display()
                ));
            }
            Outcome::Refused(why) => {
                refused += 1;
                crate::errln!("{}: {}; not imported", crate::error::one_line(&f.display().to_string()), why);
            }
        }
    }
    crate::util::out::out_text(&format!(
        "{}: {} imported, {} already there, {} refused\n",
        db.display(),
        new,
        there,
        refused
    ));
    if refused > 0 {
        crate::usage_bail!(
            "db import: {} of {} file(s) refused (each said above); the others are in {}",
            refused,
            files.len(),
            db.display()
        );
    }
    Ok(())
}
