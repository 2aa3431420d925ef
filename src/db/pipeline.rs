//! `db build` from end to end: the folders to build, built in parallel into the staging
//! folder (`out.rs`) with a progress line over them, the picks, the final hwdb file and the
//! summary table (printed, and kept as `summary.txt`), then the build put in place.

use super::build::{self, Built, Folder};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub struct BuildOpts {
    /// Model → version, where the pick by data points is overridden.
    pub picks: BTreeMap<String, String>,
    /// The build's time (merges and the hwdb header).
    pub now: u64,
    /// Folders built at once.
    pub jobs: usize,
}

/// What a build did: the table, and how many model folders failed.
pub struct Summary {
    pub table: String,
    pub failed: usize,
    pub notes: Vec<String>,
}

type Outcome = Result<Built, String>;

/// Builds every folder, `opts.jobs` at a time; the outcomes in the folders' order.
fn build_all(folders: &[Folder], staging: &Path, now: u64, jobs: usize) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..folders.len()).map(|_| None).collect());
    let _job = crate::logging::progress::job("db build");
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, folders.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(f) = folders.get(i) else { break };
                let got = build::build_folder(f, staging, now)
                    .map_err(|e| crate::error::one_line(&format!("{:#}", e)));
                slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(got);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                crate::logging::progress::step(format!(
                    "{}/{} model folders · {}/{}",
                    n,
                    folders.len(),
                    f.version,
                    f.model
                ));
            });
        }
    });
    slots
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err("not built".into())))
        .collect()
}

/// One row of the summary table.
fn row(f: &Folder, o: &Outcome, pick: Option<&str>) -> [String; 6] {
    let (files, points, fw) = match o {
        Ok(b) => (
            b.files.to_string(),
            b.points.to_string(),
            match (&b.fw, &b.fw_kept) {
                (Some((rev, n)), Ok(())) => format!("{}: {} points, kept", rev, n),
                (_, Err(why)) => format!("none ({})", why),
                (None, Ok(())) => "none".into(),
            },
        ),
        Err(why) => ("-".into(), "-".into(), format!("FAILED: {}", why)),
    };
    [
        f.model.clone(),
        f.version.clone(),
        files,
        points,
        fw,
        pick.unwrap_or("").to_string(),
    ]
}

fn table(rows: &[[String; 6]]) -> String {
    let head = [
        "model",
        "version",
        "files",
        "points",
        "firmware merge",
        "picked",
    ];
    let mut w = head.map(str::len);
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{:<w$}  ", c, w = w[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&head.map(String::from));
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// Builds the database at `db` into `out`.
pub fn run(db: &Path, out: &Path, opts: &BuildOpts) -> Result<Summary> {
    let dir = super::open(db, false)?;
    let (folders, notes) = build::folders(&dir)?;
    if folders.is_empty() {
        crate::usage_bail!(
            "{}: holds no model folder of a version with hwdb solutions (2.2 and later); \
             fill it with `db import`",
            db.display()
        );
    }
    for (m, v) in &opts.picks {
        if !folders.iter().any(|f| &f.model == m && &f.version == v) {
            crate::usage_bail!(
                "--pick {}={}: {} has no folder {}/{}",
                m,
                v,
                db.display(),
                v,
                m
            );
        }
    }
    let staging = super::out::stage(out)?;
    for sub in ["merged-results", "hwdb-inputs", "plots"] {
        std::fs::create_dir(staging.dir.join(sub))?;
    }
    let outcomes = build_all(&folders, &staging.dir, opts.now, opts.jobs);
    let mut by_model: BTreeMap<&str, Vec<(usize, &Folder)>> = BTreeMap::new();
    for (i, f) in folders.iter().enumerate() {
        by_model.entry(&f.model).or_default().push((i, f));
    }
    let mut picked_text: Vec<(&str, &str)> = Vec::new();
    let mut rows = Vec::new();
    let mut failed = 0;
    for (model, list) in &by_model {
        let built: Vec<(&Folder, usize)> = list
            .iter()
            .filter_map(|(i, f)| outcomes[*i].as_ref().ok().map(|b| (*f, b.points)))
            .collect();
        let chosen = build::pick(model, &built, &opts.picks);
        for (i, f) in list {
            failed += usize::from(outcomes[*i].is_err());
            let why = match &chosen {
                Ok((p, why)) if p.version == f.version => Some(format!("yes: {}", why)),
                Err(why) if outcomes[*i].is_ok() => Some(format!("no: {}", why)),
                _ => None,
            };
            rows.push(row(f, &outcomes[*i], why.as_deref()));
        }
        if let Ok((p, _)) = chosen {
            let i = list
                .iter()
                .find(|(_, f)| f.version == p.version)
                .map(|(i, _)| *i);
            if let Some(Ok(b)) = i.map(|i| &outcomes[i]) {
                picked_text.push((model, &b.hwdb));
            }
        }
    }
    let from = format!(
        "{} ({} model folders, {} models)",
        db.display(),
        folders.len(),
        by_model.len()
    );
    let hwdb = build::final_hwdb(opts.now, &from, &picked_text);
    let table = table(&rows);
    crate::util::atomic::write_atomic(&staging.dir.join("90-iocost-tune.hwdb"), |w| {
        w.write_all(hwdb.as_bytes())
    })?;
    crate::util::atomic::write_atomic(&staging.dir.join("summary.txt"), |w| {
        w.write_all(table.as_bytes())
    })?;
    staging.finish()?;
    Ok(Summary {
        table,
        failed,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lines_up() {
        let rows = [[
            "KINGSTON_SA2000M8250G".into(),
            "2.2".into(),
            "3".into(),
            "75".into(),
            "none".into(),
            "yes: the only version".into(),
        ]];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0].find("version"), lines[1].find("2.2"));
        assert!(lines[1].ends_with("yes: the only version"));
    }
}
