#![no_main]
// The loader catches aya-obj's panics on malformed objects (they become errors), so the
// target runs with a hook that lets caught panics pass; see `run_catching_panics`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_fuzz::run_catching_panics(data, sluice_fuzz::harness::ebpf_loader);
});
