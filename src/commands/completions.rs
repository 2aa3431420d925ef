//! `completions`: the shell completion script, generated from the command-line definitions.

use super::shared::{Globals, LOG};
use anyhow::Result;

/// Print a shell completion script: `source <(resctl-bench completions bash)`, or save it where
/// the shell loads completions from (the Debian package installs them)
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

pub fn exec(_g: &Globals, a: Args) -> Result<()> {
    crate::util::out::out_text(&script(a.shell));
    Ok(())
}

/// The completion script for `shell`.
pub fn script(shell: clap_complete::Shell) -> String {
    let mut out = Vec::new();
    let mut cmd = super::parse::visible_command();
    clap_complete::generate(shell, &mut cmd, "resctl-bench", &mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    if shell != clap_complete::Shell::Bash {
        return text;
    }
    // clap_complete's bash script spells a subcommand's state `resctl__bench__subcmd__X` where
    // it walks the words and `resctl__subcmd__bench__subcmd__X` in the arms that complete it,
    // for any binary named with a hyphen (clap-rs/clap#6421): past the subcommand nothing
    // completes. Spell the arms as the walk does.
    text.replace("resctl__subcmd__bench__subcmd__", "resctl__bench__subcmd__")
}
