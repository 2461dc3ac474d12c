//! CPU time of the calling thread (each worker measures its own).

/// The calling thread's user and system CPU time, in seconds.
pub fn thread_cpu_time() -> Option<(f64, f64)> {
    // SAFETY: rusage is plain data; getrusage fills it and we check the result.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage; RUSAGE_THREAD is the calling thread.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Some((tv(ru.ru_utime), tv(ru.ru_stime)))
}
