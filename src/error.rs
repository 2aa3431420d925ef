//! Error kinds that decide the exit code: a `UsageError` anywhere in an error chain means the
//! user gave us something we can't accept (exit 2); everything else is a failure (exit 1).

/// Bad input: a spec, an option value, a result file, a missing requirement. The message is one
/// line naming the input, what was wrong and what is accepted.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// Shorthand for returning a `UsageError` from functions returning `anyhow::Result`.
#[macro_export]
macro_rules! usage_bail {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::error::UsageError(format!($($arg)*))))
    };
}

pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// An error message as the one line a command ends with: control characters (a newline in a
/// path, a tab, an escape) written as escapes, so the line stays one line whatever it quotes.
pub fn one_line(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    for c in msg.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Exit code for an error chain.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err
        .chain()
        .any(|e| e.downcast_ref::<UsageError>().is_some())
    {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}

/// The usage error for a bad value of command-line option `--opt`: `--opt "x" is not a …` when
/// the message starts with the value, else `--opt: message`.
pub fn option_error(opt: &str, msg: String) -> anyhow::Error {
    if msg.starts_with('"') {
        UsageError::new(format!("--{} {}", opt, msg)).into()
    } else {
        UsageError::new(format!("--{}: {}", opt, msg)).into()
    }
}
