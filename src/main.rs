use anyhow::{bail, Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use sluice::cli::{lab, out, report, run, Cli, Command, LabCommand, RunArgs};
use sluice::config::TUNABLES;
use sluice::{out, outln};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Errors are the user's to read: one line with its causes (`a: b: c`), never a backtrace,
/// whatever RUST_BACKTRACE says.
fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes as `a: b: c`, leaving out a cause whose text the line already
/// holds (library errors often quote their source in their own message).
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command.unwrap_or(Command::Run(RunArgs::default())) {
        Command::Run(args) => cmd_run(args),
        Command::Xdp(cmd) => sluice::cli::xdp::main(cmd).map_err(Into::into),
        Command::Bench(args) => sluice::bench::main(&args).map(|_| ()).map_err(Into::into),
        Command::Lab(cmd) => cmd_lab(cmd),
        Command::Gen(args) => {
            let stop = stop_on_signals()?;
            let rep = sluice::cli::gen::run(&args, stop)?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&rep)?);
            } else {
                outln!(
                    "{}: sent {} packets in {:.2} s ({:.3} Mpps), {} refused, {} doorbells",
                    rep.iface,
                    rep.sent,
                    rep.seconds,
                    rep.pps / 1e6,
                    rep.refused,
                    rep.doorbells
                );
            }
            Ok(())
        }
        Command::Tunables => {
            // The value as `--set` takes it (the table's source text writes `30_000`, and the
            // default qdisc by its index).
            let defaults = sluice::config::Tunables::default();
            let width = TUNABLES.iter().map(|t| t.0.len()).max().unwrap_or(0);
            for (name, doc, source) in TUNABLES {
                let default = defaults.get_text(name).unwrap_or_else(|_| source.to_string());
                outln!("{name:<width$} {default:>10}  {doc}");
            }
            // The kernel's derived quotas: shown, not settable (no sysctls of their own).
            outln!("derived, not settable (as in the kernel):");
            for (name, bias, what) in sluice::tunables::DERIVED {
                let v = defaults.derived_value(name).unwrap_or_default();
                outln!("{name:<width$} {v:>10}   net.core.dev_weight × {bias}: {what}.");
            }
            Ok(())
        }
    }
}

fn cmd_lab(cmd: LabCommand) -> Result<()> {
    match cmd {
        LabCommand::Up { prefix, topology } => {
            lab::up(&prefix, topology)?;
            let [a, b] = lab::SIDES;
            outln!(
                "lab `{prefix}` up: host a {} (netns {}), host b {} (netns {})",
                a.host_v4(),
                a.netns(&prefix),
                b.host_v4(),
                b.netns(&prefix)
            );
            match topology {
                lab::Topology::Router | lab::Topology::Chain => outln!(
                    "route it: sluice lab config --prefix {prefix}{} > lab.toml && sluice run --config lab.toml --seconds 3600\n\
                     then: ip netns exec {} ping {}",
                    if topology == lab::Topology::Chain { " --topology chain" } else { "" },
                    a.netns(&prefix),
                    b.host_v4()
                ),
                lab::Topology::Kernel => outln!("the kernel routes it in netns {}", lab::router_netns(&prefix)),
            }
            Ok(())
        }
        LabCommand::Down { prefix } => {
            let removed = lab::down(&prefix)?;
            if removed.is_empty() {
                outln!("lab `{prefix}`: nothing to remove");
            } else {
                outln!("lab `{prefix}` down: removed {}", removed.join(", "));
            }
            Ok(())
        }
        LabCommand::Config { prefix, kind, topology } => {
            if kind != "afxdp" && kind != "afpacket" {
                bail!("--kind {kind}: the lab's ports are afxdp or afpacket");
            }
            if topology == lab::Topology::Kernel {
                bail!("--topology kernel: the kernel routes that lab, sluice has no config for it");
            }
            out!("{}", lab::config_toml_for(&prefix, &kind, topology));
            Ok(())
        }
    }
}

/// SIGINT and SIGTERM raise the returned flag: the run stops at the next poll boundary,
/// flushes, and reports. A second SIGINT while stopping exits at once.
fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&stop)).context("installing a signal handler")?;
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing a signal handler")?;
    }
    Ok(stop)
}

fn cmd_run(args: RunArgs) -> Result<()> {
    let secs = args.seconds.unwrap_or(10.0);
    let quiet = args.quiet || args.json;
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new((secs * 1000.0) as u64);
        b.set_style(ProgressStyle::with_template("{bar:40} {elapsed}/{duration} {msg}").context("progress template")?);
        b
    };
    let stop = stop_on_signals()?;
    let mut prev = sluice::stats::Counters::default();
    let mut last = Duration::ZERO;
    let rep = run::execute_until(&args, Some(Arc::clone(&stop)), |c, el| {
        if !quiet {
            let dt = (el - last).as_secs_f64();
            let line = report::tick_line(c, &prev, dt, el.as_secs_f64());
            // Without a terminal the bar is hidden and would swallow its println: print plainly.
            if bar.is_hidden() {
                outln!("{line}");
            } else {
                bar.println(line);
            }
            bar.set_position(el.as_millis() as u64);
        }
        if out::closed() {
            // Nobody reads our output any more: stop as on SIGINT (captures still flushed).
            stop.store(true, Ordering::Relaxed);
        }
        prev = c.clone();
        last = el;
    })?;
    bar.finish_and_clear();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        out!("{}", report::summary(&rep));
    }
    if let Err(e) = &rep.conservation {
        bail!("conservation violated: {e}");
    }
    if !rep.output_errors.is_empty() {
        bail!("output not written: {}", rep.output_errors.join("; "));
    }
    if rep.unexplained_check_failures() > 0 {
        bail!("{} packets failed the check sink", rep.check_failures);
    }
    Ok(())
}
