use anyhow::{bail, Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use sluice::cli::{report, run, Cli, Command, RunArgs};
use sluice::config::TUNABLES;
use std::time::Duration;

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Run(RunArgs::default())) {
        Command::Run(args) => cmd_run(args),
        Command::Xdp(cmd) => sluice::cli::xdp::main(cmd).map_err(Into::into),
        Command::Bench(args) => sluice::bench::main(&args).map(|_| ()).map_err(Into::into),
        Command::Tunables => {
            for (name, doc, default) in TUNABLES {
                println!("{name:<34} {default:>8}  {doc}");
            }
            Ok(())
        }
    }
}

fn cmd_run(args: RunArgs) -> Result<()> {
    let secs = args.seconds.unwrap_or(10.0);
    let bar = if args.quiet || args.json {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new((secs * 1000.0) as u64);
        b.set_style(ProgressStyle::with_template("{bar:40} {elapsed}/{duration} {msg}").context("progress template")?);
        b
    };
    let mut prev = sluice::stats::Counters::default();
    let mut last = Duration::ZERO;
    let quiet = args.quiet || args.json;
    let rep = run::execute(&args, |dp, el| {
        if !quiet {
            let dt = (el - last).as_secs_f64();
            let line = report::tick_line(&dp.c, &prev, dt, el.as_secs_f64());
            // Without a terminal the bar is hidden and would swallow its println: print plainly.
            if bar.is_hidden() {
                println!("{line}");
            } else {
                bar.println(line);
            }
            bar.set_position(el.as_millis() as u64);
        }
        prev = dp.c.clone();
        last = el;
    })?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        print!("{}", report::summary(&rep));
    }
    if let Err(e) = &rep.conservation {
        bail!("conservation violated: {e}");
    }
    if rep.check_failures > 0 {
        bail!("{} packets failed the check sink", rep.check_failures);
    }
    Ok(())
}
