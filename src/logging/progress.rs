//! The one progress display every bench reports through: what runs (the job), its phase and
//! step (`storage loop 1/3 · memory search probe 5 · 1.5G`), elapsed time, an estimate of the
//! time left where the bench can give one, and a short status of the current probe.
//!
//! On a terminal it is one line redrawn in place below the log (`indicatif`); otherwise (a pipe,
//! a file, a VM guest's console) it is a plain log line whenever the phase or step changes and
//! at least once a minute while neither does. The state is global, like the logger: the deep
//! code that knows the step (hashd's sizing search) reports without a handle being passed down.

use std::io::IsTerminal;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How often a plain-line display repeats an unchanged line.
const PLAIN_PERIOD: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    title: String,
    started: Option<Instant>,
    /// Where in a parent job's sequence the phases below belong (`config 3/6 vrate=60`).
    context: String,
    /// Seconds the parent job needs after what the current [`eta`] covers.
    eta_after: f64,
    phase: String,
    step: String,
    status: String,
    /// Seconds left, as estimated at `eta_at`.
    eta: Option<(f64, Instant)>,
    bar: Option<indicatif::ProgressBar>,
    last_plain: Option<Instant>,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// `75`, `4m05s`, `2h03m`: compact elapsed/remaining times.
pub fn format_secs(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{}s", s),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The line for a state at `now`: `TITLE PHASE · STEP | ELAPSED[, ~LEFT left] | STATUS`.
fn render(st: &State, now: Instant) -> String {
    let mut what = st.title.clone();
    for part in [&st.context, &st.phase, &st.step] {
        if part.is_empty() {
            continue;
        }
        what += if what == st.title { " " } else { " · " };
        what += part;
    }
    let elapsed = st.started.map_or(0.0, |s| (now - s).as_secs_f64());
    let mut line = format!("{} | {}", what, format_secs(elapsed));
    match st.eta {
        Some((left, at)) => {
            let left = (left - (now - at).as_secs_f64()).max(0.0) + st.eta_after;
            line += &format!(", ~{} left", format_secs(left));
        }
        None if st.eta_after > 0.0 => {
            line += &format!(", more than ~{} left", format_secs(st.eta_after));
        }
        None => {}
    }
    if !st.status.is_empty() {
        line += " | ";
        line += &st.status;
    }
    line
}

/// Shows the line: redraws the bar; without one, returns the line to log when it changed
/// (`changed`) or has not been shown for a while. The caller logs it once the state is
/// unlocked (the logger prints through [`print_line`], which locks it).
fn show(st: &mut State, changed: bool) -> Option<String> {
    st.started?;
    let now = Instant::now();
    let line = render(st, now);
    if let Some(bar) = &st.bar {
        bar.set_message(line.clone());
        if changed {
            super::file::to_file_only(log::Level::Info, &line);
        }
        return None;
    }
    if changed || !matches!(st.last_plain, Some(t) if now - t < PLAIN_PERIOD) {
        st.last_plain = Some(now);
        return Some(line);
    }
    None
}

/// Updates the state and shows the result.
fn update(changed: bool, f: impl FnOnce(&mut State)) {
    let line = {
        let mut st = state();
        f(&mut st);
        show(&mut st, changed)
    };
    if let Some(line) = line {
        log::info!(target: "progress", "{}", line);
    }
}

/// Whether the display is a redrawn line (stderr is a terminal).
fn on_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// The display of one job; dropping it clears the line.
#[must_use = "the display ends when the guard is dropped"]
pub struct Job(());

/// Starts the display for a job titled `title` (e.g. `storage`).
pub fn job(title: &str) -> Job {
    update(false, |st| {
        if let Some(bar) = st.bar.take() {
            bar.finish_and_clear();
        }
        *st = State {
            title: title.to_string(),
            started: Some(Instant::now()),
            bar: on_terminal().then(new_bar),
            // The runner has just said the job starts; the first line comes with its phase.
            last_plain: Some(Instant::now()),
            ..Default::default()
        };
    });
    Job(())
}

/// The redrawn line on stderr.
fn new_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        None,
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {wide_msg}").expect("a valid template"),
    );
    bar.enable_steady_tick(Duration::from_secs(1));
    bar
}

impl Drop for Job {
    fn drop(&mut self) {
        let mut st = state();
        if let Some(bar) = st.bar.take() {
            bar.finish_and_clear();
        }
        *st = State::default();
    }
}

/// The job's phase (`loop 1/3`); clears the step and status.
pub fn phase(text: impl Into<String>) {
    let text = text.into();
    update(true, |st| {
        st.phase = text;
        st.step.clear();
        st.status.clear();
    });
}

/// The step inside the phase (`memory search probe 5 · 1.5G`); clears the status.
pub fn step(text: impl Into<String>) {
    let text = text.into();
    update(true, |st| {
        st.step = text;
        st.status.clear();
    });
}

/// A short status of the current step, updated as it goes (e.g. every second).
pub fn status(text: impl Into<String>) {
    let text = text.into();
    update(false, |st| st.status = text);
}

/// A job made of sub-benches: where the phases that follow belong (`config 3/6 vrate=60`),
/// and the seconds the job needs after the sub-bench's own estimate ([`eta`]) runs out.
/// Clears the phase, step, status and estimate.
pub fn context(text: impl Into<String>, secs_after: f64) {
    let text = text.into();
    update(true, |st| {
        st.context = text;
        st.eta_after = secs_after.max(0.0);
        st.phase.clear();
        st.step.clear();
        st.status.clear();
        st.eta = None;
    });
}

/// The estimated time left for the whole job (or, under a [`context`], for the current
/// sub-bench); `None` when it can't be told.
pub fn eta(secs_left: Option<f64>) {
    let mut st = state();
    st.eta = secs_left.map(|s| (s, Instant::now()));
}

/// Prints a log line so that it doesn't tear the redrawn progress line.
pub fn print_line(line: &str) {
    let st = state();
    match &st.bar {
        Some(bar) => bar.suspend(|| crate::errln!("{}", line)),
        None => crate::errln!("{}", line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_job_phase_step_times_and_status() {
        let t0 = Instant::now();
        let mut st = State {
            title: "storage".into(),
            started: Some(t0),
            ..Default::default()
        };
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(render(&st, at(5)), "storage | 5s");
        st.phase = "loop 2/3".into();
        st.step = "memory search probe 5 · 1.5G".into();
        st.eta = Some((600.0, at(65)));
        st.status = "rps 98% of 1000".into();
        assert_eq!(
            render(&st, at(125)),
            "storage loop 2/3 · memory search probe 5 · 1.5G | 2m05s, ~9m00s left | rps 98% of 1000"
        );
        st.phase.clear();
        st.eta = Some((10.0, at(0)));
        assert_eq!(
            render(&st, at(7300)),
            "storage memory search probe 5 · 1.5G | 2h01m, ~0s left | rps 98% of 1000"
        );
    }

    #[test]
    fn a_context_goes_before_the_phase_and_adds_to_the_estimate() {
        let t0 = Instant::now();
        let mut st = State {
            title: "iocost-qos".into(),
            started: Some(t0),
            context: "config 3/6 vrate=60".into(),
            eta_after: 1800.0,
            phase: "storage loop 1/1".into(),
            ..Default::default()
        };
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(
            render(&st, at(60)),
            "iocost-qos config 3/6 vrate=60 · storage loop 1/1 | 1m00s, more than ~30m00s left"
        );
        st.eta = Some((600.0, at(60)));
        assert_eq!(
            render(&st, at(120)),
            "iocost-qos config 3/6 vrate=60 · storage loop 1/1 | 2m00s, ~39m00s left"
        );
    }
}
