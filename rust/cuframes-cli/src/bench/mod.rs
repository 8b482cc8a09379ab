//! `cuframes bench`: the harness of [`cuframes_bench`] run with the
//! command's options ([`options`]); its report as a table or JSON
//! ([`summary`]), its latencies as a plot ([`plot`]), and an exit status
//! that fails on a mismatched frame or an error.

mod options;
mod plot;
mod summary;

use std::path::Path;
use std::process::ExitCode;

use cuframes::{Error, ErrorKind, Result};
use cuframes_bench::{Bench, Plan};
use serde_json::Value;

use crate::args::BenchArgs;

pub fn run(a: BenchArgs) -> Result<ExitCode> {
    let mut bench = Bench::new(options::plan(&a)?)?;
    let mut reports = Vec::new();
    let mut curves = Vec::new();
    for transport in bench.plan().transports.clone() {
        if !a.json {
            eprintln!("cuframes bench: {} ...", transport.name());
        }
        let measured = bench.measure(transport)?;
        let (report, latency) = summary::summarize(bench.plan(), transport, &measured);
        reports.push(report);
        curves.push((transport.name().to_owned(), latency));
    }
    if a.json {
        println!("{}", Value::Array(reports.clone()));
    } else {
        summary::print_table(&reports);
    }
    if let Some(path) = &a.plot {
        write_plot(path, bench.plan(), &curves)?;
    }
    outcome(&reports)
}

/// `--plot`: the latency CDFs of every transport.
fn write_plot(path: &Path, plan: &Plan, curves: &[(String, Vec<u64>)]) -> Result<()> {
    let layout = &plan.geometry.layout;
    let title = format!(
        "cuframes bench: {} {}x{} {} memory, {} subscriber(s), {} frames",
        plan.format().name(),
        layout.width(),
        layout.height(),
        plan.memory.name(),
        plan.subscribers,
        plan.frames
    );
    std::fs::write(path, plot::latency_cdf_svg(&title, curves))
        .map_err(|e| Error::io(format!("writing --plot {}", path.display()), &e))
}

/// Fails the run on a frame that mismatched the pattern, then on any
/// transport's error.
fn outcome(reports: &[Value]) -> Result<ExitCode> {
    let mismatched: u64 = reports
        .iter()
        .map(|r| r["mismatched"].as_u64().unwrap_or(0))
        .sum();
    if mismatched > 0 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("{mismatched} frame(s) mismatched the pattern"),
        ));
    }
    if let Some(e) = reports.iter().find_map(|r| r["error"].as_str()) {
        return Err(Error::new(ErrorKind::Io, e.to_owned()));
    }
    Ok(ExitCode::SUCCESS)
}
