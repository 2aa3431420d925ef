//! Reading the command line: clap's checks, then that every global option given applies to the
//! subcommand (`options_of`), with each subcommand's help showing only the options it reads.

use super::{options_of, Cli};

fn global_ids(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().to_string())
        .collect()
}

/// The command line, each subcommand's help showing only the global options it reads: the
/// others are defined on it again, hidden (clap then doesn't propagate the visible ones).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for sub in subs {
        let Some(keep) = options_of(&sub) else {
            continue;
        };
        let hidden: Vec<clap::Arg> = globals
            .iter()
            .filter(|g| !keep.contains(&g.get_id().as_str()))
            .map(|g| g.clone().hide(true))
            .collect();
        cmd = cmd.mut_subcommand(&sub, |sc| sc.args(hidden));
    }
    cmd
}

/// The command line as a user types it, for the shell completions: the visible subcommands,
/// each with its own arguments and the global options it reads (clap's propagation would give
/// every subcommand all of them, and the hidden copies [`command`] adds would show).
pub fn visible_command() -> clap::Command {
    use clap::CommandFactory;
    let full = Cli::command();
    let globals: Vec<clap::Arg> = full
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.clone().global(false))
        .collect();
    let mut cmd = clap::Command::new("resctl-bench")
        .version(env!("CARGO_PKG_VERSION"))
        .args(globals.iter().cloned());
    for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        let keep = options_of(sub.get_name());
        let reads = globals
            .iter()
            .filter(|g| keep.is_none_or(|k| k.contains(&g.get_id().as_str())));
        cmd = cmd.subcommand(sub.clone().args(reads.cloned()));
    }
    cmd
}

/// Why the command line was refused.
#[derive(Debug)]
pub enum ParseError {
    /// clap's own (it prints and exits: help, version, usage errors).
    Clap(clap::Error),
    /// A global option the subcommand doesn't read (one line, exit 2).
    NotApplicable(String),
}

/// Parses the command line: clap's checks, then that every global option given applies to
/// the subcommand.
pub fn parse_from<I, T>(args: I) -> Result<Cli, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let mut cmd = command();
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let m = cmd
        .try_get_matches_from_mut(args.clone())
        .map_err(ParseError::Clap)?;
    if let Some(sub) = m.subcommand_name() {
        if let Some(twice) = given_on_both_sides(&cmd, &args, sub) {
            return Err(ParseError::NotApplicable(format!(
                "{} is given before and after the subcommand; give it once",
                twice
            )));
        }
    }
    if let Some((sub, sm)) = m.subcommand() {
        if let Some(keep) = options_of(sub) {
            for id in global_ids(&cmd) {
                if keep.contains(&id.as_str())
                    || sm.value_source(&id) != Some(clap::parser::ValueSource::CommandLine)
                {
                    continue;
                }
                let flag = |id: &str| {
                    let a = cmd.get_arguments().find(|a| a.get_id() == id);
                    a.and_then(|a| a.get_long())
                        .map_or(id.to_string(), |l| format!("--{}", l))
                };
                let accepted: Vec<String> = keep.iter().map(|k| flag(k)).collect();
                return Err(ParseError::NotApplicable(format!(
                    "{} doesn't apply to {} (its options: {}; see `resctl-bench help {}`)",
                    flag(&id),
                    sub,
                    accepted.join(", "),
                    sub
                )));
            }
        }
    }
    Cli::from_arg_matches(&m).map_err(|e| ParseError::Clap(e.format(&mut cmd)))
}

/// A global option that takes a value and is given both before and after the subcommand
/// (`-r A summary -r B`): clap keeps the later one silently, while `-r A -r B` is refused.
/// Returns how it was given (`--result`).
fn given_on_both_sides(
    cmd: &clap::Command,
    args: &[std::ffi::OsString],
    sub: &str,
) -> Option<String> {
    let globals: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set() && a.get_action().takes_values())
        .collect();
    let mut seen: [Vec<&str>; 2] = [Vec::new(), Vec::new()];
    let mut side = 0;
    let mut i = 1;
    while i < args.len() {
        let tok = args[i].to_string_lossy();
        i += 1;
        if tok == "--" {
            break;
        }
        if let Some(long) = tok.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            if let Some(a) = globals.iter().find(|a| a.get_long() == Some(name)) {
                seen[side].push(a.get_id().as_str());
                i += usize::from(!inline);
            }
        } else if tok.len() > 1 && tok.starts_with('-') {
            // A cluster of short options: the first that takes a value ends it.
            for (at, c) in tok.char_indices().skip(1) {
                if let Some(a) = globals.iter().find(|a| a.get_short() == Some(c)) {
                    seen[side].push(a.get_id().as_str());
                    i += usize::from(at + c.len_utf8() == tok.len());
                    break;
                }
            }
        } else if side == 0 && tok == sub {
            side = 1;
        }
    }
    let twice = seen[0].iter().find(|id| seen[1].contains(id))?;
    let a = globals.iter().find(|a| a.get_id() == *twice)?;
    Some(
        a.get_long()
            .map_or(twice.to_string(), |l| format!("--{}", l)),
    )
}

/// Drops the hidden subcommands (`__hashd`, …) from the "similar subcommands" tip of an
/// unrecognized-subcommand error: they are internal and never what a user meant.
pub fn without_hidden_suggestions(mut err: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::Strings(list)) = err.get(ContextKind::SuggestedSubcommand) else {
        return err;
    };
    let visible: Vec<String> = list
        .iter()
        .filter(|s| !s.starts_with("__"))
        .cloned()
        .collect();
    if !visible.is_empty() {
        err.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(visible),
        );
        return err;
    }
    // No tip left: the same error without the suggestion context.
    let mut bare = clap::Error::new(err.kind()).with_cmd(&<Cli as clap::CommandFactory>::command());
    for kind in [ContextKind::InvalidSubcommand, ContextKind::Usage] {
        if let Some(v) = err.get(kind) {
            bare.insert(kind, v.clone());
        }
    }
    bare
}
