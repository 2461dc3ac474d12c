//! `dpdk-testpmd` as an external comparison: started with stats printed every second,
//! its `Rx-pps:` lines are read after the warm-up, then it is stopped with SIGINT.

use super::runner::Sample;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum TestpmdError {
    #[error("cannot start {program}: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("testpmd exited before reporting ({status}); last output: {tail}")]
    Exited { status: String, tail: String },
    #[error("testpmd reported no packet rate within {secs:.0} s; last output: {tail}")]
    Timeout { secs: f64, tail: String },
}

/// Finds `program` on PATH (or as given, when it contains a slash).
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Parses the number after `Rx-pps:` in a testpmd stats line.
pub fn parse_rx_pps(line: &str) -> Option<f64> {
    let rest = &line[line.find("Rx-pps:")? + "Rx-pps:".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Parses the port number of a `NIC statistics for port N` header.
pub fn parse_port_header(line: &str) -> Option<usize> {
    let rest = &line[line.find("statistics for port")? + "statistics for port".len()..];
    rest.split_whitespace().next()?.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok()
}

/// Collects stats blocks (one Rx-pps per port) from testpmd's output lines.
#[derive(Debug, Default)]
pub struct StatsParser {
    port: usize,
    current: [Option<f64>; 2],
    /// Completed blocks: (time the block completed, [port 0, port 1] Rx-pps).
    pub blocks: Vec<(Instant, [f64; 2])>,
    /// When forwarding started (the "start packet forwarding" / "packet forwarding -" line).
    pub forwarding_since: Option<Instant>,
}

impl StatsParser {
    pub fn line(&mut self, at: Instant, line: &str) {
        if self.forwarding_since.is_none() && (line.contains("start packet forwarding") || line.contains("packet forwarding - ports=")) {
            self.forwarding_since = Some(at);
        }
        if let Some(p) = parse_port_header(line) {
            self.port = p;
        }
        if let Some(v) = parse_rx_pps(line) {
            if self.port < 2 {
                self.current[self.port] = Some(v);
            }
            if let [Some(a), Some(b)] = self.current {
                self.blocks.push((at, [a, b]));
                self.current = [None, None];
            }
        }
    }
}

/// User and system CPU ticks of the process's forwarding threads (DPDK names them
/// `rte-worker-N`, `dpdk-worker-N` or `lcore-worker-N` depending on the version).
fn worker_cpu_ticks(pid: u32) -> Option<(u64, u64)> {
    let mut total = None;
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else { continue };
        let Some(close) = stat.rfind(')') else { continue };
        let comm = stat.get(stat.find('(').map(|i| i + 1).unwrap_or(0)..close).unwrap_or("");
        if !comm.contains("worker") {
            continue;
        }
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // After the comm: state is field 3, utime field 14, stime field 15.
        let (Some(u), Some(s)) = (f.get(11).and_then(|v| v.parse::<u64>().ok()), f.get(12).and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        let (tu, ts) = total.unwrap_or((0, 0));
        total = Some((tu + u, ts + s));
    }
    total
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn tail(lines: &[String]) -> String {
    let n = lines.len();
    let s: Vec<&str> = lines[n.saturating_sub(4)..].iter().map(|l| l.trim()).filter(|l| !l.is_empty()).collect();
    if s.is_empty() {
        "(none)".into()
    } else {
        s.join(" | ")
    }
}

fn stop(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid; harmless if it already exited.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs testpmd once: waits `warmup` seconds after forwarding starts, then averages the
/// Rx-pps stats periods that lie wholly after it, at least one and about `measure`
/// seconds' worth. `progress(seconds)` is called as periods arrive.
pub fn run(program: &Path, args: &[String], warmup: f64, measure: f64, mut progress: impl FnMut(f64)) -> Result<Sample, TestpmdError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| TestpmdError::Spawn { program: program.display().to_string(), source })?;
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || pump(out, tx)));
    }
    if let Some(err) = child.stderr.take() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || pump(err, tx)));
    }
    drop(tx);

    let periods_needed = (measure.round() as usize).max(1);
    let start = Instant::now();
    let limit = Duration::from_secs_f64(30.0 + warmup + 3.0 * periods_needed as f64);
    let mut parser = StatsParser::default();
    // The forwarding threads' CPU ticks when each stats block arrived.
    let mut ticks: Vec<Option<(u64, u64)>> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    let result = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok((at, line)) => {
                parser.line(at, &line);
                while ticks.len() < parser.blocks.len() {
                    ticks.push(worker_cpu_ticks(child.id()));
                }
                if !line.trim().is_empty() && !line.contains("Rx-pps") {
                    lines.push(line);
                    if lines.len() > 64 {
                        lines.drain(..32);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                break Err(TestpmdError::Exited { status, tail: tail(&lines) });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(fwd) = parser.forwarding_since {
            progress(fwd.elapsed().as_secs_f64().min(warmup + periods_needed as f64 + 1.0));
            // A period is the second before its block: keep blocks whose period began after
            // the warm-up. The first block is always 0 ("since last show" has no last show).
            let from = fwd + Duration::from_secs_f64(warmup + 0.95);
            let good: Vec<usize> = (1..parser.blocks.len()).filter(|&i| parser.blocks[i].0 >= from).collect();
            if good.len() >= periods_needed {
                break Ok(good);
            }
        }
        if start.elapsed() > limit {
            break Err(TestpmdError::Timeout { secs: limit.as_secs_f64(), tail: tail(&lines) });
        }
    };
    stop(&mut child);
    drop(rx);
    for r in readers {
        let _ = r.join();
    }
    let good = result?;
    let periods: Vec<[f64; 2]> = good.iter().map(|&i| parser.blocks[i].1).collect();
    let mpps = periods.iter().map(|p| (p[0] + p[1]) / 1e6).sum::<f64>() / periods.len() as f64;
    // The measured span runs from the block before the first good one to the last good one.
    let (first, last) = (good[0].saturating_sub(1), good[good.len() - 1]);
    let wall = parser.blocks[last].0.duration_since(parser.blocks[first].0).as_secs_f64();
    let secs = if wall > 0.5 { wall } else { periods.len() as f64 };
    let cpu = match (ticks.get(first).copied().flatten(), ticks.get(last).copied().flatten()) {
        (Some((u0, s0)), Some((u1, s1))) if wall > 0.5 => {
            let hz = clock_ticks_per_second();
            Some((u1.saturating_sub(u0) as f64 / hz, s1.saturating_sub(s0) as f64 / hz))
        }
        _ => None,
    };
    let packets = mpps * 1e6 * secs;
    Ok(Sample {
        seconds: secs,
        mpps,
        gbps: None,
        ns_per_packet: if mpps > 0.0 { 1e3 / mpps } else { f64::INFINITY },
        rx_packets: packets as u64,
        cpu_user_s: cpu.map(|c| c.0),
        cpu_sys_s: cpu.map(|c| c.1),
        cpu_util: cpu.map(|c| (c.0 + c.1) / secs),
        cpu_ns_per_packet: cpu.filter(|_| packets > 0.0).map(|c| (c.0 + c.1) * 1e9 / packets),
        testpmd_periods: periods,
        ..Default::default()
    })
}

fn pump(r: impl Read, tx: mpsc::Sender<(Instant, String)>) {
    let mut br = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match br.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if tx.send((Instant::now(), String::from_utf8_lossy(&buf).into_owned())).is_err() {
                    // Receiver gone: keep draining so the child never blocks on a full pipe.
                    let _ = std::io::copy(&mut br, &mut std::io::sink());
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stats_blocks() {
        let text = "\
No commandline core given, start packet forwarding
  ######################## NIC statistics for port 0  ########################
  Rx-pps:            0          Rx-bps:            0
  ######################## NIC statistics for port 1  ########################
  Rx-pps:            0          Rx-bps:            0
\x1b[2J\x1b[1;1H
  ######################## NIC statistics for port 0  ########################
  Rx-pps:     10114383          Rx-bps:            0
  ######################## NIC statistics for port 1  ########################
  Rx-pps:     10114365          Rx-bps:            0
";
        let mut p = StatsParser::default();
        let t = Instant::now();
        for l in text.lines() {
            p.line(t, l);
        }
        assert!(p.forwarding_since.is_some());
        assert_eq!(p.blocks.len(), 2);
        assert_eq!(p.blocks[1].1, [10114383.0, 10114365.0]);
        assert_eq!(parse_rx_pps("garbage"), None);
        assert_eq!(parse_rx_pps("Rx-pps: x"), None);
    }

    #[test]
    fn missing_program_is_none() {
        assert!(find_program("surely-not-a-program-sluice").is_none());
    }
}
