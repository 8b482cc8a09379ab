//! `cuframes`: publish, subscribe, list, inspect and clean up frame rings.

mod args;
mod bench;
mod duration;
mod exporter;
mod health;
mod inspect;
mod logline;
mod manual;
mod publish;
mod report;
mod signals;
mod subscribe;
mod top;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    logline::init(cli.log_format);
    let result = match cli.command {
        Command::Publish(a) => publish::run(a),
        Command::Subscribe(a) => subscribe::run(a),
        Command::Ls(a) => inspect::ls(a),
        Command::Inspect(a) => inspect::inspect(a),
        Command::Cleanup(a) => inspect::cleanup(a),
        Command::Bench(a) => bench::run(a),
        Command::Top(a) => top::run(a),
        Command::Exporter(a) => exporter::run(a),
        Command::Health(a) => health::run(a),
        Command::Completions(a) => manual::completions(a),
        Command::Manpage(a) => manual::manpage(a),
        Command::BenchWorker(a) => cuframes_bench::worker::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            logline::event(
                logline::Level::Error,
                None,
                "error",
                &e.to_string(),
                serde_json::json!({"kind": format!("{:?}", e.kind())}),
            );
            ExitCode::FAILURE
        }
    }
}
