//! `cuframes completions SHELL` and `cuframes manpage`: what packages
//! install (scripts/package-deb.sh), made from the same clap definition as
//! `--help`, so they never disagree with it. Hidden from `--help`.

use std::process::ExitCode;

use clap::{Command as ClapCommand, CommandFactory};
use cuframes::{Error, ErrorKind, Result};

use crate::args::{Cli, CompletionsArgs, ManpageArgs};

/// `cmd` without what it hides (clap_complete offers hidden commands and
/// options): its visible options and, recursively, its visible commands.
fn without_hidden(cmd: &ClapCommand) -> ClapCommand {
    let mut out = ClapCommand::new(cmd.get_name().to_owned())
        .args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(without_hidden),
        )
        .subcommand_required(cmd.is_subcommand_required_set())
        .arg_required_else_help(cmd.is_arg_required_else_help_set());
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(about) = cmd.get_long_about() {
        out = out.long_about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(version.to_owned());
    }
    out
}

/// The interface the pages and completions describe: what `--help` shows,
/// without the hidden commands (these two, the bench worker) and the
/// hidden millisecond options of 0.2.
fn public_command() -> ClapCommand {
    without_hidden(&Cli::command())
}

pub fn completions(a: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = public_command();
    clap_complete::generate(a.shell, &mut cmd, "cuframes", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

fn io_error(what: &str, e: std::io::Error) -> Error {
    Error::new(ErrorKind::Io, format!("{what}: {e}"))
}

pub fn manpage(a: ManpageArgs) -> Result<ExitCode> {
    let cmd = public_command();
    match a.dir {
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .map_err(|e| io_error("writing the manual page", e))?,
        Some(dir) => {
            if !dir.is_dir() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("bad --dir {}: not a directory", dir.display()),
                ));
            }
            clap_mangen::generate_to(cmd, &dir)
                .map_err(|e| io_error(&format!("writing manual pages into {}", dir.display()), e))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
