//! Writing to the standard streams without panicking. `print!`/`eprintln!` panic when the
//! stream is a closed pipe (`… 2>&1 | head`); a benchmark must not die of that halfway through
//! a run, so what can't be written is dropped. And a stream closed at start (`2>&-`) would
//! hand its descriptor to the next file we open — the result file, say — and the log would be
//! written into it: [`ensure_std_fds`] puts `/dev/null` there first.

use std::io::Write;

/// One line on stderr; dropped if stderr can't take it.
pub fn err_line(args: std::fmt::Arguments) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|_| e.write_all(b"\n"));
}

/// `text` on stdout, flushed; dropped if stdout can't take it (the reader went away).
pub fn out_text(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|_| o.flush());
}

/// Opens `/dev/null` on each of descriptors 0, 1 and 2 that isn't open.
pub fn ensure_std_fds() {
    for fd in 0..=2 {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            continue;
        }
        let flags = if fd == 0 {
            libc::O_RDONLY
        } else {
            libc::O_WRONLY
        };
        // SAFETY: a NUL-terminated path; open(2) returns the lowest free descriptor, which is
        // `fd` when the ones below it are open (they are, in this order).
        let got = unsafe { libc::open(c"/dev/null".as_ptr(), flags) };
        if got >= 0 && got != fd {
            // SAFETY: both descriptors are ours; dup2 onto the closed one, then drop the extra.
            unsafe {
                libc::dup2(got, fd);
                libc::close(got);
            }
        }
    }
}

/// `eprintln!` that never panics (see the module).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::util::out::err_line(format_args!($($arg)*))
    };
}
