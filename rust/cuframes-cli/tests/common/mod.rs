//! Helpers for the `cuframes` process tests: a private runtime directory
//! per test, unique keys, child processes that are always reaped (and killed
//! when a test fails), deadlines instead of sleeps, and parsing of
//! `subscribe --json`.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::Value;

/// How long a child that should end soon may take before the test fails.
pub const EXIT_LIMIT: Duration = Duration::from_secs(15);
/// How long a socket may take to appear.
pub const SOCKET_LIMIT: Duration = Duration::from_secs(5);

/// The `cuframes` binary under test: `$CUFRAMES_BIN` when set (test
/// binaries staged for another machine), else the one cargo built.
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("CUFRAMES_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_cuframes").to_owned())
    })
}

/// A private runtime directory plus the keys a test used; dropping it removes
/// whatever shared memory those keys left behind (killed publishers leave it).
#[derive(Debug)]
pub struct TestEnv {
    dir: tempfile::TempDir,
    keys: Mutex<Vec<String>>,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        TestEnv {
            dir: tempfile::tempdir().expect("temp runtime dir"),
            keys: Mutex::new(Vec::new()),
        }
    }

    /// The runtime directory (CUFRAMES_RUNTIME_DIR of every child).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A key unique on this machine: `t<pid>-<tag>` (tags are unique per test binary).
    pub fn key(&self, tag: &str) -> String {
        let key = format!("t{}-{tag}", std::process::id());
        assert!(key.len() <= 63, "key {key} too long");
        self.keys.lock().unwrap().push(key.clone());
        key
    }

    pub fn socket(&self, key: &str) -> PathBuf {
        self.dir().join(format!("{key}.sock"))
    }

    pub fn lock(&self, key: &str) -> PathBuf {
        self.dir().join(format!("{key}.lock"))
    }

    /// `cuframes <args>` with CUFRAMES_RUNTIME_DIR set and stdout/stderr piped.
    pub fn command<S: AsRef<str>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(args.iter().map(|a| a.as_ref()))
            .env("CUFRAMES_RUNTIME_DIR", self.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Starts `cuframes <args>`.
    pub fn spawn<S: AsRef<str>>(&self, name: &str, args: &[S]) -> Proc {
        Proc::spawn(name, self.command(args))
    }

    /// Runs `cuframes <args>` to completion (bounded by [`EXIT_LIMIT`]).
    pub fn run<S: AsRef<str>>(&self, args: &[S]) -> Finished {
        let name = args.first().map_or("cuframes", |a| a.as_ref()).to_owned();
        self.spawn(&name, args).wait(EXIT_LIMIT)
    }

    /// Runs `cuframes <args>` to completion with every CUDA device hidden
    /// (`CUDA_VISIBLE_DEVICES=-1`): what a machine without a GPU sees, here
    /// too when there is one.
    pub fn run_without_gpu<S: AsRef<str>>(&self, args: &[S]) -> Finished {
        let name = args.first().map_or("cuframes", |a| a.as_ref()).to_owned();
        let mut cmd = self.command(args);
        cmd.env("CUDA_VISIBLE_DEVICES", "-1");
        Proc::spawn(&name, cmd).wait(EXIT_LIMIT)
    }

    /// `cuframes publish KEY --memory host <options>` (options split at whitespace).
    pub fn publish(&self, key: &str, options: &str) -> Proc {
        let mut args = vec!["publish", key, "--memory", "host"];
        args.extend(options.split_whitespace());
        self.spawn(&format!("publish {key}"), &args)
    }

    /// `cuframes subscribe KEY --json <options>` (options split at whitespace).
    pub fn subscribe(&self, key: &str, options: &str) -> Proc {
        let mut args = vec!["subscribe", key, "--json"];
        args.extend(options.split_whitespace());
        self.spawn(&format!("subscribe {key}"), &args)
    }

    /// Waits until `key`'s socket exists and accepts connections.
    pub fn wait_for_socket(&self, key: &str) {
        let path = self.socket(key);
        wait_until(
            SOCKET_LIMIT,
            &format!("socket {} to accept", path.display()),
            || std::os::unix::net::UnixStream::connect(&path).is_ok(),
        );
    }

    /// `unshare` wrapping a `cuframes` command: new PID, IPC and mount
    /// namespaces and a private /dev/shm, the runtime directory still shared.
    pub fn isolated<S: AsRef<str>>(&self, args: &[S]) -> Command {
        let cmd = self.command(args);
        let program = cmd.get_program().to_owned();
        let rest: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        let mut wrapped = Command::new("unshare");
        wrapped
            .args([
                "--pid",
                "--ipc",
                "--mount",
                "--fork",
                "--mount-proc",
                // Killing the test's process (unshare) kills the namespace's
                // first process, and with it the namespace.
                "--kill-child",
                "--",
                "sh",
                "-c",
            ])
            .arg(r#"mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@""#)
            .arg(program)
            .args(rest);
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        wrapped
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        wrapped
    }

    /// Starts `cuframes <command line>` (split at whitespace) in its own
    /// namespaces, as [`TestEnv::isolated`].
    pub fn spawn_isolated(&self, name: &str, command_line: &str) -> Proc {
        let args: Vec<&str> = command_line.split_whitespace().collect();
        Proc::spawn(name, self.isolated(&args))
    }

    /// Starts a publisher and waits until its socket accepts connections
    /// (panics with the publisher's output when it exits first).
    pub fn start_publisher(&self, key: &str, options: &str) -> Proc {
        let mut publisher = self.publish(key, options);
        let path = self.socket(key);
        let deadline = Instant::now() + SOCKET_LIMIT;
        loop {
            if std::os::unix::net::UnixStream::connect(&path).is_ok() {
                return publisher;
            }
            if !publisher.is_running() {
                let out = publisher.wait(EXIT_LIMIT);
                panic!("publisher of {key} exited before its socket appeared: {out}");
            }
            assert!(
                Instant::now() < deadline,
                "socket {} did not appear within {SOCKET_LIMIT:?}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

// Tests that need something a machine may lack (a GPU, root, namespaces) are
// `#[ignore]`d with the reason, so a plain `cargo test` lists them as ignored
// rather than passed, and sit in a module named for each thing they need:
// `needs_gpu`, `needs_two_gpus`, `needs_root`, `needs_namespaces`.
// `scripts/test-rust.sh` (and `scripts/gpu-test.sh` on the GPU machine) runs
// them with `--include-ignored`, less `--skip needs_X::` for whatever this
// machine lacks, and counts those as skipped. Each such test starts with a
// `require_*` call: run where it cannot run its subject, it fails, saying why.

/// Panics unless this process is root and `setpriv` can run the CLI as
/// `nobody` (the `needs_root` tests of `cli_access.rs`).
pub fn require_root() {
    if !nix::unistd::geteuid().is_root() {
        panic!("{NOT_HERE}: needs root");
    }
    let ok = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin(),
            "--version",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{NOT_HERE}: needs setpriv, and `nobody` must be able to execute {}",
        bin()
    );
}

/// Panics unless this machine can make PID, IPC and mount namespaces with a
/// private /dev/shm (the `needs_namespaces` tests).
pub fn require_namespaces() {
    if let Some(why) = namespaces_unavailable() {
        panic!("{NOT_HERE}: {why}");
    }
}

/// The start of a `require_*` failure.
const NOT_HERE: &str = "this test cannot run its subject here (it is #[ignore]d for that reason; \
     scripts/test-rust.sh runs it only where it can)";

/// Why namespace tests cannot run here (they need root and `unshare`), or None.
pub fn namespaces_unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (unshare and mount)".into());
    }
    let probe = Command::new("unshare")
        .args([
            "--pid",
            "--ipc",
            "--mount",
            "--fork",
            "--mount-proc",
            "--",
            "sh",
            "-c",
        ])
        .arg("mount -t tmpfs tmpfs /dev/shm")
        .output();
    match probe {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "unshare failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("no unshare: {e}")),
    }
}

impl Default for TestEnv {
    fn default() -> Self {
        TestEnv::new()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        for key in self.keys.lock().map(|k| k.clone()).unwrap_or_default() {
            let _ = std::fs::remove_file(shm_path(&key));
        }
    }
}

/// `/dev/shm/cuframes-<key>`.
pub fn shm_path(key: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/cuframes-{key}"))
}

/// Polls `cond` every 2 ms; panics when it is still false after `limit`.
/// Returns how long it took.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if cond() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A finished child: status and everything it wrote.
#[derive(Debug)]
pub struct Finished {
    pub name: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The exit code (None when killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Asserts a clean exit 0.
    pub fn assert_success(&self) -> &Finished {
        assert!(self.status.success(), "{} failed: {self}", self.name);
        self
    }

    /// The last non-empty stdout line as JSON (`subscribe --json`, `ls --json`, ...).
    pub fn json(&self) -> Value {
        last_json_line(&self.stdout).unwrap_or_else(|e| panic!("{}: {e}: {self}", self.name))
    }

    /// The non-empty stderr lines.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| !l.trim().is_empty()).collect()
    }

    /// Asserts a failure (exit 1) reported as exactly one stderr line
    /// `cuframes: error: ...` containing every one of `phrases`; returns the line.
    pub fn assert_error(&self, phrases: &[&str]) -> String {
        assert_eq!(
            self.code(),
            Some(1),
            "{} should fail with exit 1: {self}",
            self.name
        );
        // A process run with a CUFRAMES_TEST_* switch says so first (D20); a
        // subscriber that waited over a second for its publisher said so
        // (cli_errors.rs checks that line).
        let lines: Vec<&str> = self
            .stderr_lines()
            .into_iter()
            .filter(|l| !l.contains("is set: a test switch"))
            .filter(|l| !(l.starts_with("cuframes: waiting up to ") && l.ends_with("(--wait-timeout)")))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "{} should print exactly one stderr line: {self}",
            self.name
        );
        let line = lines[0];
        assert!(
            line.starts_with("cuframes: error:"),
            "{}: bad error line: {self}",
            self.name
        );
        for phrase in phrases {
            assert!(
                line.contains(phrase),
                "{}: error line lacks {phrase:?}: {self}",
                self.name
            );
        }
        line.to_owned()
    }

    /// Asserts a malformed command line: exit 2, clap's `error: ...` on
    /// stderr containing every one of `phrases`, nothing on stdout.
    pub fn assert_usage_error(&self, phrases: &[&str]) {
        assert_eq!(
            self.code(),
            Some(2),
            "{} should fail with exit 2 (usage): {self}",
            self.name
        );
        assert!(
            self.stderr.starts_with("error:"),
            "{}: not a usage error: {self}",
            self.name
        );
        assert!(self.stdout.is_empty(), "{}: printed a report: {self}", self.name);
        for phrase in phrases {
            assert!(
                self.stderr.contains(phrase),
                "{}: usage error lacks {phrase:?}: {self}",
                self.name
            );
        }
    }
}

impl std::fmt::Display for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} exited with {:?} (signal {:?})\n--- stdout ---\n{}--- stderr ---\n{}",
            self.name,
            self.status.code(),
            self.status.signal(),
            self.stdout,
            self.stderr
        )
    }
}

/// Parses the last non-empty line of `stdout` as JSON.
pub fn last_json_line(stdout: &str) -> Result<Value, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("no output on stdout")?;
    serde_json::from_str(line).map_err(|e| format!("last stdout line is not JSON ({e}): {line}"))
}

/// A child process whose pipes are drained in the background; dropping it
/// kills and reaps the child, so a failing test leaves nothing running.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    reaped: bool,
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> Option<JoinHandle<String>> {
    let mut pipe = pipe?;
    Some(std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    }))
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {name}: {e}"));
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        Proc {
            name: name.to_owned(),
            child,
            stdout,
            stderr,
            reaped: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL (`kill -9`).
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: Signal) {
        nix::sys::signal::kill(Pid::from_raw(self.pid() as i32), signal).expect("kill(2)");
    }

    /// Whether the child has not exited yet.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the exit; kills the child and fails the test after `limit`.
    pub fn wait(mut self, limit: Duration) -> Finished {
        match self.wait_within(limit) {
            Ok(out) => out,
            Err(out) => panic!("{} did not exit within {limit:?} (killed): {out}", out.name),
        }
    }

    /// Waits for the exit up to `limit`: Ok with the result, or Err (with the
    /// output so far) after killing the child when it hung.
    pub fn wait_within(&mut self, limit: Duration) -> Result<Finished, Finished> {
        let deadline = Instant::now() + limit;
        let mut hung = false;
        let status = loop {
            match self.child.try_wait().expect("try_wait") {
                Some(status) => break status,
                None if Instant::now() >= deadline => {
                    hung = true;
                    let _ = self.child.kill();
                    break self.child.wait().expect("wait after kill");
                }
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        };
        self.reaped = true;
        let join =
            |h: Option<JoinHandle<String>>| h.map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        let out = Finished {
            name: self.name.clone(),
            status,
            stdout: join(self.stdout.take()),
            stderr: join(self.stderr.take()),
        };
        if hung { Err(out) } else { Ok(out) }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Field `name` of a JSON object as u64 (panics with the object otherwise).
pub fn uint(v: &Value, name: &str) -> u64 {
    v[name]
        .as_u64()
        .unwrap_or_else(|| panic!("field {name} is not an unsigned integer in {v}"))
}

/// Asserts that a `subscribe --json` summary read `count` verified frames,
/// seqs `first..=first + count - 1`, with nothing mismatched or dropped.
pub fn assert_all_verified(summary: &Value, first: u64, count: u64) {
    assert_eq!(uint(summary, "frames"), count, "frames: {summary}");
    assert_eq!(uint(summary, "verified"), count, "verified: {summary}");
    assert_eq!(uint(summary, "mismatched"), 0, "mismatched: {summary}");
    assert_eq!(uint(summary, "dropped"), 0, "dropped: {summary}");
    assert_eq!(uint(summary, "overwritten"), 0, "overwritten: {summary}");
    assert_eq!(uint(summary, "first_seq"), first, "first_seq: {summary}");
    assert_eq!(
        uint(summary, "last_seq"),
        first + count - 1,
        "last_seq: {summary}"
    );
    assert!(summary["error"].is_null(), "error: {summary}");
}
