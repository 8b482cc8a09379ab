//! The worker processes of one transport, seen from the publisher: started
//! (this executable again, as [`WORKER_COMMAND`]), each waited for until
//! it says `ready`, and at the end collected: each one's result line,
//! within a limit.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cuframes::{Error, ErrorKind, Result};
use serde_json::Value;

use crate::plan::Plan;
use crate::transport::Transport;
use crate::worker_args::{WORKER_COMMAND, WorkerArgs};
use crate::worker_result::SubscriberResult;

/// One subscriber process; killed on drop unless it was waited for.
#[derive(Debug)]
pub struct Worker {
    pub index: usize,
    child: Child,
    /// The pipe transport's frames, shm-copy's wake-ups; None for cuframes.
    pub stdin: Option<ChildStdin>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    reaped: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads `pipe` to its end on a thread of its own (a full pipe must never
/// block a worker).
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Starts `plan.subscribers` workers of `transport` on `target` and waits
/// until each says `ready` (set up: connected, mapped); the first that
/// does not fails the start, and every worker is killed.
pub fn spawn_workers(plan: &Plan, transport: Transport, target: &str) -> Result<Vec<Worker>> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding this executable", &e))?;
    let mut starting = Vec::new();
    for index in 0..plan.subscribers {
        let args = WorkerArgs::new(plan, transport, target, index);
        starting.push(start(&exe, &args, transport != Transport::Cuframes)?);
    }
    let mut ready = Vec::new();
    let mut failure = None;
    for s in starting {
        let (mut worker, not_ready) = read_ready(s);
        if let Some(first_line) = not_ready
            && failure.is_none()
        {
            failure = Some(worker.not_started(transport, &first_line));
        }
        ready.push(worker);
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(ready),
    }
}

/// A worker started, its stdout not read yet.
struct Starting {
    worker: Worker,
    stdout: ChildStdout,
}

fn start(exe: &Path, args: &WorkerArgs, piped_stdin: bool) -> Result<Starting> {
    let mut child = Command::new(exe)
        .arg(WORKER_COMMAND)
        .args(args.to_args())
        .stdin(if piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("starting subscriber {}", args.index), &e))?;
    let stdout = child.stdout.take().expect("piped");
    let worker = Worker {
        index: args.index,
        stdin: child.stdin.take(),
        stdout: None,
        stderr: Some(drain(child.stderr.take().expect("piped"))),
        child,
        reaped: false,
    };
    Ok(Starting { worker, stdout })
}

/// Reads the worker's first line; the worker, and that line unless it
/// was `ready`.
fn read_ready(s: Starting) -> (Worker, Option<String>) {
    let mut reader = BufReader::new(s.stdout);
    let mut line = String::new();
    let ok = reader.read_line(&mut line).is_ok() && line.trim() == "ready";
    let mut worker = s.worker;
    worker.stdout = Some(drain(reader));
    (worker, (!ok).then_some(line))
}

impl Worker {
    fn stderr_text(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Kills a worker that did not say `ready`; why, from what it printed
    /// (`first_line`, the rest of its stdout, its stderr).
    fn not_started(&mut self, transport: Transport, first_line: &str) -> Error {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped = true;
        let out = self.stdout.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let why = format!("{} {}", first_line.trim(), out.trim());
        let stderr = self.stderr_text();
        Error::new(
            ErrorKind::Io,
            format!(
                "{} subscriber {} did not start: {stderr} {}",
                transport.name(),
                self.index,
                why.trim()
            ),
        )
    }

    /// Closes its stdin (the end of the stream), waits for the exit (killing
    /// it after `limit`) and reads its result line.
    fn finish(mut self, limit: Duration) -> Result<SubscriberResult> {
        drop(self.stdin.take());
        let status = self.wait(limit)?;
        let out = self.stdout.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let err = self.stderr_text();
        let result = out
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| serde_json::from_str::<Value>(l).ok());
        match result {
            Some(v) if status.success() => Ok(SubscriberResult::from_json(&v)),
            _ => Err(Error::new(
                ErrorKind::Io,
                format!("subscriber {} failed ({status}): {err}", self.index),
            )),
        }
    }

    /// Waits for the exit; kills it after `limit`.
    fn wait(&mut self, limit: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.reaped = true;
                    return Ok(status);
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                _ => {
                    let _ = self.child.kill();
                    self.reaped = true;
                    let _ = self.child.wait();
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "subscriber {} did not finish within {} ms",
                            self.index,
                            limit.as_millis()
                        ),
                    ));
                }
            }
        }
    }
}

/// Collects every worker's result, each within the timeout (and 5 s for
/// the exit); the first error one reported, or of one that failed.
pub fn collect(plan: &Plan, workers: Vec<Worker>) -> (Vec<SubscriberResult>, Option<String>) {
    let mut results = Vec::new();
    let mut error = None;
    for w in workers {
        match w.finish(plan.timeout + Duration::from_secs(5)) {
            Ok(result) => {
                if let Some(e) = &result.error {
                    error.get_or_insert_with(|| format!("subscriber {}: {e}", result.index));
                }
                results.push(result);
            }
            Err(e) => {
                error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    (results, error)
}
