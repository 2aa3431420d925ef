//! Dispatch of a parsed command line to the subcommand implementations.

use crate::cli::{Cli, Command};
use anyhow::Result;

pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Run(_) => todo_cmd("run"),
        Command::Study(_) => todo_cmd("study"),
        Command::Solve(_) => todo_cmd("solve"),
        Command::Format(_) => todo_cmd("format"),
        Command::Summary(_) => todo_cmd("summary"),
        Command::Pack => todo_cmd("pack"),
        Command::Doc(a) => {
            print!("{}", crate::doc::render(&a.subjects)?);
            Ok(())
        }
    }
}

// Temporary while the subcommands are being wired up in this session.
fn todo_cmd(name: &str) -> Result<()> {
    anyhow::bail!("{} is being wired up", name)
}
