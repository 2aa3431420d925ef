//! The one progress display every bench reports through: what runs (the job), its phase and
//! step (`storage loop 1/3 · memory search probe 5 · 1.5G`), elapsed time, an estimate of the
//! time left where the bench can give one, and a short status of the current probe.
//!
//! On a terminal it is one line redrawn in place below the log (`indicatif`); otherwise (a pipe,
//! a file) it is a plain log line whenever the phase or step changes and at least once a minute
//! while neither does. In a `resctl-bench vm` guest, whose stderr is a serial port, the host
//! says with [`TERM_COLS_ENV`] that its own stderr is a terminal of that width: the line is then
//! redrawn with ANSI sequences that the host passes through to it. The state is global, like
//! the logger: the deep code that knows the step (hashd's sizing search) reports without a
//! handle being passed down.
//!
//! Time left comes from the bench ([`eta`]: the job, or under a [`context`] the sub-bench) or,
//! once a search inside the phase can tell, from the phase itself: the search's own estimate
//! ([`phase_eta`]) plus the phases like it that follow ([`repeats`]: storage's later loops).

use std::io::IsTerminal;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How often a plain-line display repeats an unchanged line.
const PLAIN_PERIOD: Duration = Duration::from_secs(60);

/// Set by `resctl-bench vm` in the guest when the host's stderr is a terminal: its width in
/// columns. The guest's stderr then draws the redrawn line as on the host.
pub const TERM_COLS_ENV: &str = "RESCTL_BENCH_TERM_COLS";

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
    /// When the current phase began.
    phase_started: Option<Instant>,
    /// Seconds left in the current phase, as a search inside it estimated them then.
    phase_eta: Option<(f64, Instant)>,
    /// Phases like the current one that follow it, and how long each takes when known
    /// (else as long as this one is estimated to take in all).
    repeats: (u32, Option<f64>),
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
    let since = |at: Instant| (now - at).as_secs_f64();
    let phase_left = st.phase_eta.map(|(left, at)| (left - since(at)).max(0.0));
    if let Some(left) = phase_left {
        let (after, each) = st.repeats;
        let each = each.unwrap_or_else(|| st.phase_started.map_or(0.0, since) + left);
        let total = left + f64::from(after) * each + st.eta_after;
        line += &format!(", ~{} left", format_secs(total));
        if !st.status.is_empty() {
            line += " | ";
            line += &st.status;
        }
        return line;
    }
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

/// Where the redrawn line goes, if anywhere: a terminal on stderr, or a VM host's terminal
/// behind the guest's stderr ([`TERM_COLS_ENV`]).
enum Screen {
    Terminal,
    VmHost(u16),
    Lines,
}

fn screen() -> Screen {
    if std::io::stderr().is_terminal() {
        return Screen::Terminal;
    }
    match std::env::var(TERM_COLS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(cols) if cols >= 20 => Screen::VmHost(cols),
        _ => Screen::Lines,
    }
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
            bar: new_bar(screen()),
            // The runner has just said the job starts; the first line comes with its phase.
            last_plain: Some(Instant::now()),
            ..Default::default()
        };
    });
    Job(())
}

/// The redrawn line on stderr, unless the display is plain lines.
fn new_bar(screen: Screen) -> Option<indicatif::ProgressBar> {
    let target = match screen {
        Screen::Terminal => indicatif::ProgressDrawTarget::stderr_with_hz(4),
        Screen::VmHost(cols) => {
            indicatif::ProgressDrawTarget::term_like_with_hz(Box::new(AnsiStderr { cols }), 4)
        }
        Screen::Lines => return None,
    };
    let bar = indicatif::ProgressBar::with_draw_target(None, target);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {wide_msg}").expect("a valid template"),
    );
    bar.enable_steady_tick(Duration::from_secs(1));
    Some(bar)
}

/// A VM guest's stderr with a terminal behind it (on the host, `cols` wide): the cursor moves
/// as ANSI sequences, which the serial port and the host carry through unchanged.
#[derive(Debug)]
struct AnsiStderr {
    cols: u16,
}

impl AnsiStderr {
    fn put(&self, s: &str) -> std::io::Result<()> {
        use std::io::Write;
        // A closed or broken stderr loses the line, not the run.
        let _ = std::io::stderr().lock().write_all(s.as_bytes());
        Ok(())
    }

    fn moved(&self, n: usize, code: char) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.put(&format!("\x1b[{}{}", n, code))
    }
}

impl indicatif::TermLike for AnsiStderr {
    fn width(&self) -> u16 {
        self.cols
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.moved(n, 'A')
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.moved(n, 'B')
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.moved(n, 'C')
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.moved(n, 'D')
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.put(&format!("{}\n", s))
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.put(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.put("\r\x1b[2K")
    }
    fn flush(&self) -> std::io::Result<()> {
        use std::io::Write;
        let _ = std::io::stderr().lock().flush();
        Ok(())
    }
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

/// The job's phase (`loop 1/3`); clears the step, status and the phase's estimate.
pub fn phase(text: impl Into<String>) {
    let text = text.into();
    update(true, |st| {
        st.phase = text;
        st.step.clear();
        st.status.clear();
        st.phase_started = Some(Instant::now());
        st.phase_eta = None;
        st.repeats = (0, None);
    });
}

/// How many phases like the current one follow it (storage's loops after this one), and the
/// seconds each takes when known (the finished loops' mean); `None`: as long as this one.
/// Counts only once a search in the phase gives its estimate ([`phase_eta`]).
pub fn repeats(after: u32, each: Option<f64>) {
    state().repeats = (after, each);
}

/// The seconds a search estimates the current phase still needs, corrected as it goes (e.g.
/// after each probe); it takes over from [`eta`] until the next phase.
pub fn phase_eta(secs_left: f64) {
    if secs_left.is_finite() {
        state().phase_eta = Some((secs_left.max(0.0), Instant::now()));
    }
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
        st.phase_eta = None;
        st.repeats = (0, None);
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

    #[test]
    fn a_phase_estimate_counts_the_phases_like_it_after_it() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut st = State {
            title: "storage".into(),
            started: Some(t0),
            phase: "loop 1/3".into(),
            phase_started: Some(at(30)),
            // Before the search can tell: the bench's own estimate, none yet.
            repeats: (2, None),
            ..Default::default()
        };
        assert_eq!(render(&st, at(60)), "storage loop 1/3 | 1m00s");
        // After the first probe: 150 s left in this loop, which will then have taken 200 s,
        // and two loops like it after it: 150 + 2 × 200 s.
        st.phase_eta = Some((150.0, at(80)));
        assert_eq!(render(&st, at(80)), "storage loop 1/3 | 1m20s, ~9m10s left");
        // Corrected as it goes; finished loops' mean, once known, counts instead.
        st.repeats = (1, Some(100.0));
        st.phase_eta = Some((40.0, at(200)));
        st.eta_after = 60.0;
        assert_eq!(
            render(&st, at(210)),
            "storage loop 1/3 | 3m30s, ~3m10s left"
        );
    }
}
