//! `man`: the manual pages, generated from the command-line definitions: `resctl-bench(1)` and
//! one `resctl-bench-SUBCOMMAND(1)` per visible subcommand.

use super::shared::{Globals, LOG};
use anyhow::{Context, Result};
use std::path::Path;

/// Print the manual page (`resctl-bench man | man -l -`), or write every page into a directory
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write resctl-bench.1 and resctl-bench-SUBCOMMAND.1 for each subcommand into DIR
    /// (created if missing) instead of printing the main page
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

pub fn exec(_g: &Globals, a: Args) -> Result<()> {
    let mut cmd = super::parse::command().display_name("resctl-bench");
    // Propagates the global options into each subcommand (those it reads are visible there).
    cmd.build();
    let Some(dir) = a.out else {
        crate::util::out::out_text(&String::from_utf8_lossy(&render(cmd)?));
        return Ok(());
    };
    let dir = crate::util::create::ensure_dir(&dir, "manual page directory")?;
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .cloned()
        .collect();
    write_page(&dir, "resctl-bench", cmd)?;
    for s in subs {
        let sub = s.get_name().to_string();
        let name = format!("resctl-bench-{}", sub);
        write_page(&dir, &name, s.display_name(name.clone()).bin_name(format!("resctl-bench {}", sub)))?;
    }
    Ok(())
}

fn render(cmd: clap::Command) -> Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .section("1")
        .source(concat!("resctl-bench ", env!("CARGO_PKG_VERSION")))
        .manual("resctl-bench manual")
        .render(&mut page)
        .context("rendering the manual page")?;
    Ok(page)
}

fn write_page(dir: &Path, name: &str, cmd: clap::Command) -> Result<()> {
    let page = render(cmd)?;
    crate::util::atomic::write_atomic(&dir.join(format!("{}.1", name)), |w| w.write_all(&page))
}
