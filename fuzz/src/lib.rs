//! Fuzz harness for sluice: the target bodies live in `harness` (also replayed by the main
//! crate's tests/fuzz_corpus.rs); `common` is the integration tests' router harness.

#[path = "../../tests/common/mod.rs"]
pub mod common;
pub mod harness;

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};

thread_local! {
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f` on `data` where the code under test catches some panics by design (the eBPF
/// loader turns aya-obj's panics on malformed ELF into errors): libfuzzer-sys's panic
/// hook would abort on those too. A quiet hook records each panic instead; a panic that
/// escapes `f` is printed and aborts, as libfuzzer-sys would (so it is still a crash).
///
/// `SLUICE_FUZZ_CAUGHT_PANICS=crash` keeps libfuzzer-sys's hook: every panic, caught or
/// not, is a crash (to collect inputs for the code that should not panic at all).
pub fn run_catching_panics(data: &[u8], f: fn(&[u8])) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        if std::env::var("SLUICE_FUZZ_CAUGHT_PANICS").as_deref() != Ok("crash") {
            panic::set_hook(Box::new(|info| LAST_PANIC.with_borrow_mut(|m| *m = info.to_string())));
        }
    });
    if panic::catch_unwind(AssertUnwindSafe(|| f(data))).is_err() {
        LAST_PANIC.with_borrow(|m| eprintln!("uncaught panic: {m}"));
        std::process::abort();
    }
}
