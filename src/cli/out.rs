//! Standard output that survives its reader going away (`sluice … | head -1`).
//!
//! `println!` panics on a broken pipe. Here the first failed write marks stdout closed: later
//! output is skipped, and a run sees [`closed`] and stops at a poll boundary like on SIGINT,
//! so captures are still flushed and the exit is clean.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout; on any error (a closed pipe, a full disk) stdout counts as closed.
pub fn write(text: &str) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if o.write_all(text.as_bytes()).and_then(|()| o.flush()).is_err() {
        CLOSED.store(true, Ordering::Relaxed);
    }
}

/// True once a write to stdout failed.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// `println!` that never panics (see the module docs).
#[macro_export]
macro_rules! outln {
    () => { $crate::cli::out::write("\n") };
    ($($arg:tt)*) => { $crate::cli::out::write(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that never panics.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::out::write(&format!($($arg)*)) };
}
