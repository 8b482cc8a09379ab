//! One suite over every memory backend, in the iceoryx2 manner: a scenario
//! is written once, as `fn scenario(backend: Backend)`, and
//! [`every_backend!`] makes one test of it per backend:
//!
//! - `host::scenario`: host shared memory; runs everywhere.
//! - `needs_gpu::cuda_fd::scenario` and `needs_gpu::cuda_ipc::scenario`:
//!   CUDA slots shared as file descriptors (VMM) and as CUDA IPC handles
//!   (D27). Ignored unless asked for (`--ignored`; `scripts/gpu-test.sh run
//!   lib` on the GPU machine). Without a usable GPU each one fails at once,
//!   saying why: it never passes.
//!
//! The publisher lives in a child process, [`PublisherProcess`], driven one
//! call at a time over its standard input and output: CUDA IPC handles
//! cannot be opened in the process that exported them, so a CUDA subscriber
//! and its publisher must be two processes. Host memory goes the same way,
//! so that CI, which has no GPU, runs the very harness the GPU instances
//! use. The child is this test binary itself: started with [`CHILD_ROLE`]
//! set, a constructor runs the role before libtest's `main` and exits.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cuframes::{
    CopyMode, CudaShare, CudaShareRequest, Error, ErrorKind, FrameLayout, FrameLease, HostPlane, MemoryKind,
    MemoryRequest, PixelFormat, PlanePtr, Policy, Publisher, PublisherConfig, PublisherStats, Subscriber,
    SubscriberConfig, V1Peers, pattern,
};

use super::{lease_matches, subscriber_config};

/// Where the frames live, and how the publisher shares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Host shared memory (one sealed memfd).
    Host,
    /// CUDA device memory, each slot a VMM allocation sent as a descriptor.
    CudaFd,
    /// CUDA device memory, each slot a `cuMemAlloc` named by its IPC handle.
    CudaIpc,
}

impl Backend {
    /// The memory a subscriber of this backend reads.
    pub fn memory(self) -> MemoryKind {
        match self {
            Backend::Host => MemoryKind::Host,
            Backend::CudaFd | Backend::CudaIpc => MemoryKind::Cuda,
        }
    }

    /// How the slots are shared; None for host memory.
    pub fn cuda_share(self) -> Option<CudaShare> {
        match self {
            Backend::Host => None,
            Backend::CudaFd => Some(CudaShare::Fd),
            Backend::CudaIpc => Some(CudaShare::Ipc),
        }
    }

    /// What a publisher asks for: exactly this backend, an error otherwise
    /// (never `Auto`, which would fall back to another).
    fn request(self) -> (MemoryRequest, CudaShareRequest) {
        match self {
            Backend::Host => (MemoryRequest::Host, CudaShareRequest::Auto),
            Backend::CudaFd => (MemoryRequest::Cuda, CudaShareRequest::Fd),
            Backend::CudaIpc => (MemoryRequest::Cuda, CudaShareRequest::Ipc),
        }
    }

    /// How the child publisher reports its memory: `memory share`.
    fn reported(self) -> &'static str {
        match self {
            Backend::Host => "host none",
            Backend::CudaFd => "cuda fd",
            Backend::CudaIpc => "cuda ipc",
        }
    }

    /// Fails the test, saying why, when this machine cannot run the backend:
    /// a CUDA instance without a usable GPU fails, it never passes.
    pub fn require(self) {
        if self.memory() == MemoryKind::Cuda
            && let Some(reason) = cuframes::cuda_unavailable_reason()
        {
            panic!("{self:?} needs a usable CUDA GPU, and this machine has none: {reason}");
        }
    }

    /// A publisher of `config` with this backend's memory, in a child
    /// process; fails the test if it cannot be made there.
    pub fn publisher(self, mut config: PublisherConfig) -> PublisherProcess {
        (config.memory, config.cuda_share) = self.request();
        PublisherProcess::start(self, &config)
    }

    /// [`subscriber_config`] for this backend: CUDA frames are mapped in
    /// device 0's primary context (what a subscriber without a context of
    /// its own gets).
    pub fn subscriber_config(self, key: &str, dir: &Path, name: &str) -> SubscriberConfig {
        let mut c = subscriber_config(key, dir, name);
        if self.memory() == MemoryKind::Cuda {
            c.cuda_device = 0;
        }
        c
    }

    /// A subscriber in this process, checked to read this backend's memory.
    pub fn subscribe(self, key: &str, dir: &Path, name: &str) -> Subscriber {
        self.connect(self.subscriber_config(key, dir, name))
    }

    /// [`Subscriber::connect`], checked to read this backend's memory.
    pub fn connect(self, config: SubscriberConfig) -> Subscriber {
        let name = config.name.clone();
        let sub = Subscriber::connect(config)
            .unwrap_or_else(|e| panic!("{self:?}: subscriber '{name}' could not connect: {e}"));
        self.check(&sub);
        sub
    }

    /// Fails unless `sub` reads this backend's memory, shared this
    /// backend's way: a test of one backend never runs on another.
    pub fn check(self, sub: &Subscriber) {
        let info = sub.info();
        assert_eq!(
            (info.memory, info.cuda_share()),
            (self.memory(), self.cuda_share()),
            "{self:?}: the subscriber of '{}' reads other memory",
            sub.key()
        );
    }

    /// Fails unless `lease` lives in this backend's memory.
    pub fn check_lease(self, lease: &FrameLease) {
        assert_eq!(lease.memory(), self.memory(), "{self:?}: seq {}", lease.seq());
        let want_device = self.memory() == MemoryKind::Cuda;
        for p in 0..lease.layout().planes().len() {
            let is_device = matches!(lease.plane(p).ptr, PlanePtr::Device(_));
            assert_eq!(
                is_device,
                want_device,
                "{self:?}: plane {p} of seq {}",
                lease.seq()
            );
        }
    }
}

/// Makes one test per backend of each scenario `fn name(backend: Backend)`
/// named, in the module where it is called: `host::name`, and the ignored
/// `needs_gpu::cuda_fd::name` and `needs_gpu::cuda_ipc::name` (the module
/// `needs_gpu` is what `scripts/test-rust.sh` skips without a GPU).
#[allow(unused_macros)] // by the test binaries that have scenarios
macro_rules! every_backend {
    ($($scenario:ident),* $(,)?) => {
        mod host {
            $(#[test]
            fn $scenario() {
                super::$scenario($crate::common::backend::Backend::Host);
            })*
        }
        mod needs_gpu {
            mod cuda_fd {
                $(#[test]
                #[ignore = "needs a CUDA GPU: scripts/gpu-test.sh run lib"]
                fn $scenario() {
                    let backend = $crate::common::backend::Backend::CudaFd;
                    backend.require();
                    super::super::$scenario(backend);
                })*
            }
            mod cuda_ipc {
                $(#[test]
                #[ignore = "needs a CUDA GPU: scripts/gpu-test.sh run lib"]
                fn $scenario() {
                    let backend = $crate::common::backend::Backend::CudaIpc;
                    backend.require();
                    super::super::$scenario(backend);
                })*
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use every_backend;

// ------------------------------------------------------ the parent's side

/// A publisher in a child process (see the module's comment). Every call
/// waits for the child's answer; the library's errors come back as
/// [`cuframes::Error`]s of the same kind. Dropping it ends the child as
/// dropping a [`Publisher`] would (SHUTDOWN to every subscriber).
#[derive(Debug)]
pub struct PublisherProcess {
    helper: Helper,
    key: String,
    runtime_dir: PathBuf,
}

impl PublisherProcess {
    fn start(backend: Backend, config: &PublisherConfig) -> PublisherProcess {
        let runtime_dir = config
            .runtime_dir
            .clone()
            .expect("tests publish in a runtime directory of their own");
        let what = format!("the {backend:?} publisher of '{}'", config.key);
        let mut helper = Helper::start("publisher", what, &encode_config(config));
        match helper.reply("(created)") {
            Ok(words) => assert_eq!(
                words.join(" "),
                backend.reported(),
                "{}: other memory than asked for",
                helper.what
            ),
            Err(e) => helper.fail(format!("could not be created: {e}")),
        }
        PublisherProcess {
            helper,
            key: config.key.clone(),
            runtime_dir,
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.helper.child.id()
    }

    fn call(&mut self, line: &str) -> cuframes::Result<Vec<String>> {
        self.helper.call(line)
    }

    /// Publishes the pattern frame for the next seq (copied in from host
    /// memory, whatever the backend); returns its seq.
    pub fn publish_pattern(&mut self) -> u64 {
        let words = self
            .call("publish")
            .unwrap_or_else(|e| panic!("{}: publish failed: {e}", self.helper.what));
        number(&words[0])
    }

    /// Seq the next publish will get.
    pub fn next_seq(&mut self) -> u64 {
        number(&self.answer("next_seq")[0])
    }

    /// The publisher's counters.
    pub fn stats(&mut self) -> PublisherStats {
        let n: Vec<u64> = self.answer("stats").iter().map(|w| number(w)).collect();
        PublisherStats {
            published: n[0],
            ack_timeouts: n[1],
            rejected_connections: n[2],
            ack_waits: n[3],
            ack_wait_ns: n[4],
            kernel_copies: n[5],
        }
    }

    /// Number of active subscribers.
    pub fn subscriber_count(&mut self) -> usize {
        number(&self.answer("subscriber_count")[0])
    }

    /// [`Publisher::wait_for_subscribers`].
    pub fn wait_for_subscribers(&mut self, count: usize, timeout: Duration) -> cuframes::Result<()> {
        self.call(&format!("wait_for_subscribers {count} {}", timeout.as_nanos()))
            .map(drop)
    }

    /// [`Publisher::flush`].
    pub fn flush(&mut self, timeout: Duration) -> cuframes::Result<()> {
        self.call(&format!("flush {}", timeout.as_nanos())).map(drop)
    }

    /// [`Publisher::wait_delivered`].
    pub fn wait_delivered(&mut self, timeout: Duration) -> cuframes::Result<()> {
        self.call(&format!("wait_delivered {}", timeout.as_nanos()))
            .map(drop)
    }

    /// [`Publisher::acquire_slot`]: the slot's index and the memory each
    /// plane pointer is in.
    pub fn acquire_slot(&mut self) -> cuframes::Result<(usize, Vec<MemoryKind>)> {
        let words = self.call("acquire_slot")?;
        let planes = words[1..]
            .iter()
            .map(|w| match w.as_str() {
                "host" => MemoryKind::Host,
                "device" => MemoryKind::Cuda,
                other => panic!("plane pointer kind {other:?}"),
            })
            .collect();
        Ok((number(&words[0]), planes))
    }

    /// [`Publisher::commit_slot`].
    pub fn commit_slot(&mut self, pts_ns: i64) -> cuframes::Result<u64> {
        self.call(&format!("commit_slot {pts_ns}"))
            .map(|words| number(&words[0]))
    }

    /// Drops the publisher (SHUTDOWN to every subscriber, its names
    /// removed) and waits for the child to exit, which must be cleanly.
    pub fn shut_down(mut self) {
        self.answer("shutdown");
        let status = self.helper.finish(Duration::from_secs(10));
        if !status.success() {
            self.helper.fail(format!("ended with {status} after shutdown"));
        }
    }

    /// kill -9 of the child; then removes the names it left behind (the
    /// test's subscribers keep what they mapped).
    pub fn kill(mut self) {
        self.helper.kill();
        self.remove_leftovers();
    }

    fn remove_leftovers(&self) {
        let _ = cuframes::cleanup_key(&self.key, Some(&self.runtime_dir));
    }

    /// A call that must succeed.
    fn answer(&mut self, line: &str) -> Vec<String> {
        self.call(line)
            .unwrap_or_else(|e| panic!("{}: {line} failed: {e}", self.helper.what))
    }
}

impl Drop for PublisherProcess {
    fn drop(&mut self) {
        if self.helper.status.is_none() && !self.helper.finish(Duration::from_secs(10)).success() {
            self.remove_leftovers();
        }
    }
}

/// A subscriber in a child process, for crashes: it takes frames as told,
/// checks each, and holds every one until it is killed.
#[derive(Debug)]
pub struct SubscriberProcess {
    helper: Helper,
}

impl SubscriberProcess {
    /// Connects a subscriber of `backend` in a child; fails the test if it
    /// cannot, or reads other memory.
    pub fn start(backend: Backend, key: &str, dir: &Path, name: &str) -> SubscriberProcess {
        let config = backend.subscriber_config(key, dir, name);
        let spec = [
            format!("key={key}"),
            format!("runtime_dir={}", dir.display()),
            format!("name={name}"),
            format!("cuda_device={}", config.cuda_device),
        ]
        .join("\t");
        let what = format!("the {backend:?} subscriber '{name}' of '{key}'");
        let mut helper = Helper::start("subscriber", what, &spec);
        match helper.reply("(connected)") {
            Ok(words) => assert_eq!(words.join(" "), backend.reported(), "{}", helper.what),
            Err(e) => helper.fail(format!("could not connect: {e}")),
        }
        SubscriberProcess { helper }
    }

    /// Takes the next frame (within `timeout`) and holds it; returns its seq
    /// after checking that it is the pattern frame for that seq.
    pub fn take(&mut self, timeout: Duration) -> u64 {
        let words = self
            .helper
            .call(&format!("take {}", timeout.as_nanos()))
            .unwrap_or_else(|e| panic!("{}: take failed: {e}", self.helper.what));
        assert_eq!(words[1], "matches", "{}: seq {}", self.helper.what, words[0]);
        number(&words[0])
    }

    /// kill -9, with every frame it took still held.
    pub fn kill(mut self) {
        self.helper.kill();
    }
}

/// The environment variable that makes this test binary a helper child:
/// `publisher` or `subscriber`.
pub const CHILD_ROLE: &str = "CUFRAMES_TEST_CHILD_ROLE";

/// A helper child: this test binary in a [`CHILD_ROLE`], reading one line
/// per call on its standard input and answering one line on its standard
/// output (`ok WORDS...` or `err CODE MESSAGE`); what it says on standard
/// error is kept for the test's failure message.
#[derive(Debug)]
struct Helper {
    what: String,
    child: Child,
    commands: Option<ChildStdin>,
    replies: BufReader<ChildStdout>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl Helper {
    /// Starts the child in `role` and sends it `spec`, its first line.
    fn start(role: &str, what: String, spec: &str) -> Helper {
        let exe = std::env::current_exe().expect("the path of this test binary");
        let mut child = Command::new(exe)
            // Should the constructor not take over, libtest runs no test.
            .args(["--exact", "not-a-test: a helper child"])
            .env(CHILD_ROLE, role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        let mut pipe = child.stderr.take().expect("piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let replies = BufReader::new(child.stdout.take().expect("piped"));
        let mut helper = Helper {
            what,
            commands: child.stdin.take(),
            child,
            replies,
            stderr,
            stderr_reader: Some(stderr_reader),
            status: None,
        };
        helper.send(spec);
        helper
    }

    /// Sends `line` and returns the answer: Ok(the words after "ok"), or
    /// the error the child's call returned. A child that went away fails
    /// the test, with what it said.
    fn call(&mut self, line: &str) -> cuframes::Result<Vec<String>> {
        self.send(line);
        self.reply(line)
    }

    fn send(&mut self, line: &str) {
        let sent = match self.commands.as_mut() {
            Some(stdin) => writeln!(stdin, "{line}").and_then(|()| stdin.flush()),
            None => panic!("{}: {line:?} after its end", self.what),
        };
        if sent.is_err() {
            self.went_away(line);
        }
    }

    /// The answer to `line`, already sent.
    fn reply(&mut self, line: &str) -> cuframes::Result<Vec<String>> {
        let mut reply = String::new();
        if !matches!(self.replies.read_line(&mut reply), Ok(1..)) {
            self.went_away(line);
        }
        let reply = reply.trim_end();
        if let Some(words) = reply.strip_prefix("ok") {
            return Ok(words.split_whitespace().map(str::to_owned).collect());
        }
        let error = reply.strip_prefix("err ").and_then(|rest| rest.split_once(' '));
        match error.and_then(|(code, message)| Some((code.parse::<i32>().ok()?, message))) {
            Some((code, message)) => Err(Error::new(ErrorKind::from_code(code), message)),
            None => self.fail(format!("{reply:?} in answer to {line:?}")),
        }
    }

    fn went_away(&mut self, line: &str) -> ! {
        let status = self.wait_for(Duration::from_secs(5));
        self.fail(format!("went away at {line:?} (exit: {status:?})"))
    }

    /// Fails the test with `message` and what the child said.
    fn fail(&mut self, message: String) -> ! {
        let said = self.said();
        panic!("{}: {message}; on standard error it said:\n{said}", self.what)
    }

    /// What the child said on standard error (all of it, once it exited).
    fn said(&mut self) -> String {
        if self.status.is_some()
            && let Some(reader) = self.stderr_reader.take()
        {
            let _ = reader.join();
        }
        self.stderr.lock().unwrap().clone()
    }

    /// Waits at most `limit` for the child to exit.
    fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while self.status.is_none() {
            match self.child.try_wait() {
                Ok(Some(status)) => self.status = Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                _ => break,
            }
        }
        self.status
    }

    /// kill -9, and reaps it.
    fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        let status = self.child.wait().expect("reaping a helper child");
        self.status = Some(status);
        status
    }

    /// Closes its standard input, which ends it; kills it if it is not
    /// gone within `limit`.
    fn finish(&mut self, limit: Duration) -> ExitStatus {
        self.commands.take();
        match self.wait_for(limit) {
            Some(status) => status,
            None => self.kill(),
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.finish(Duration::from_secs(10));
        }
    }
}

fn number<T: std::str::FromStr>(word: &str) -> T {
    word.parse()
        .unwrap_or_else(|_| panic!("{word:?} is not a number"))
}

/// `config` as one line of tab-separated `name=value` fields.
fn encode_config(c: &PublisherConfig) -> String {
    assert!(
        c.cuda.is_none() && c.external_slots.is_none() && c.logger.is_none(),
        "a publisher in a child process takes no CUDA binding, external slots or logger"
    );
    let memory = match c.memory {
        MemoryRequest::Auto => "auto",
        MemoryRequest::Host => "host",
        MemoryRequest::Cuda => "cuda",
    };
    let share = match c.cuda_share {
        CudaShareRequest::Auto => "auto",
        CudaShareRequest::Fd => "fd",
        CudaShareRequest::Ipc => "ipc",
    };
    let mut fields = vec![
        format!("key={}", c.key),
        format!("format={}", c.format.name()),
        format!("width={}", c.width),
        format!("height={}", c.height),
        format!("ring_size={}", c.ring_size),
        format!("policy={}", c.policy.name()),
        format!("ack_timeout={}", c.ack_timeout.as_nanos()),
        format!("startup_timeout={}", c.startup_timeout.as_nanos()),
        format!("handshake_timeout={}", c.handshake_timeout.as_nanos()),
        format!("memory={memory}"),
        format!("cuda_share={share}"),
        format!("cuda_device={}", c.cuda_device),
        format!("v1_peers={}", c.v1_peers.name()),
    ];
    if let Some(dir) = &c.runtime_dir {
        fields.push(format!("runtime_dir={}", dir.display()));
    }
    if let Some(group) = &c.group {
        fields.push(format!("group={group}"));
    }
    if let Some((num, den)) = c.fps {
        fields.push(format!("fps={num}/{den}"));
    }
    let line = fields.join("\t");
    assert!(!line.contains('\n'), "{line:?}");
    line
}

// ------------------------------------------------------- the child's side

/// The child's entry, run before `main` in every test binary built with
/// this module (the loader calls each function of `.init_array` first).
/// Without [`CHILD_ROLE`] it returns at once and the tests run as usual.
#[used]
// SAFETY: `.init_array` holds functions the loader calls with no
// precondition before `main`; this one is `extern "C"`, takes nothing it
// reads, and returns unless the process was started as a helper.
#[unsafe(link_section = ".init_array")]
static RUN_CHILD_ROLE: extern "C" fn() = run_child_role;

extern "C" fn run_child_role() {
    let Some(role) = std::env::var_os(CHILD_ROLE) else {
        return;
    };
    let outcome = std::panic::catch_unwind(|| match role.to_str() {
        Some("publisher") => serve_publisher(),
        Some("subscriber") => serve_subscriber(),
        _ => Err(format!("unknown {CHILD_ROLE} {role:?}")),
    });
    let code = match outcome {
        Ok(Ok(())) => 0,
        Ok(Err(why)) => {
            eprintln!("helper child: {why}");
            1
        }
        Err(_) => 101, // the panic hook printed it
    };
    std::process::exit(code);
}

/// The first line: `name=value` fields.
fn read_spec(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
) -> Result<HashMap<String, String>, String> {
    let line = lines.next().ok_or("no first line")?.map_err(|e| e.to_string())?;
    Ok(line
        .split('\t')
        .filter_map(|field| field.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

fn field<'a>(spec: &'a HashMap<String, String>, name: &str) -> Result<&'a str, String> {
    spec.get(name)
        .map(String::as_str)
        .ok_or_else(|| format!("no {name} in {spec:?}"))
}

fn parse<T: std::str::FromStr>(word: &str) -> Result<T, String> {
    word.parse().map_err(|_| format!("{word:?}: not a number"))
}

fn nanos(word: &str) -> Result<Duration, String> {
    parse(word).map(Duration::from_nanos)
}

fn decode_config(spec: &HashMap<String, String>) -> Result<PublisherConfig, String> {
    let get = |name: &str| field(spec, name);
    let format = PixelFormat::parse(get("format")?).map_err(|e| e.to_string())?;
    let mut c = PublisherConfig::new(get("key")?, format, parse(get("width")?)?, parse(get("height")?)?);
    c.ring_size = parse(get("ring_size")?)?;
    c.policy = Policy::parse(get("policy")?).map_err(|e| e.to_string())?;
    c.ack_timeout = nanos(get("ack_timeout")?)?;
    c.startup_timeout = nanos(get("startup_timeout")?)?;
    c.handshake_timeout = nanos(get("handshake_timeout")?)?;
    c.memory = MemoryRequest::parse(get("memory")?).map_err(|e| e.to_string())?;
    c.cuda_share = CudaShareRequest::parse(get("cuda_share")?).map_err(|e| e.to_string())?;
    c.cuda_device = parse(get("cuda_device")?)?;
    c.v1_peers = V1Peers::parse(get("v1_peers")?).map_err(|e| e.to_string())?;
    c.runtime_dir = spec.get("runtime_dir").map(PathBuf::from);
    c.group = spec.get("group").cloned();
    if let Some(fps) = spec.get("fps") {
        let (num, den) = fps.split_once('/').ok_or_else(|| format!("fps {fps:?}"))?;
        c.fps = Some((parse(num)?, parse(den)?));
    }
    Ok(c)
}

/// One answer line: `ok WORDS` or `err CODE MESSAGE`.
fn answer(out: &mut impl Write, result: cuframes::Result<String>) -> Result<(), String> {
    let line = match result {
        Ok(words) => format!("ok {words}"),
        Err(e) => format!("err {} {}", e.kind().code(), e.to_string().replace('\n', " ")),
    };
    writeln!(out, "{}", line.trim_end())
        .and_then(|()| out.flush())
        .map_err(|e| format!("answering: {e}"))
}

fn memory_words(memory: MemoryKind, share: Option<CudaShare>) -> String {
    let memory = match memory {
        MemoryKind::Host => "host",
        MemoryKind::Cuda => "cuda",
    };
    let share = match share {
        None => "none",
        Some(CudaShare::Fd) => "fd",
        Some(CudaShare::Ipc) => "ipc",
    };
    format!("{memory} {share}")
}

/// The pattern frame, in host memory at the layout's pitches.
struct PatternFrame {
    layout: FrameLayout,
    planes: Vec<Vec<u8>>,
}

impl PatternFrame {
    fn new(layout: &FrameLayout) -> PatternFrame {
        let planes = layout
            .planes()
            .iter()
            .map(|p| vec![0; p.pitch * p.rows])
            .collect();
        PatternFrame {
            layout: layout.clone(),
            planes,
        }
    }

    /// Publishes the pattern frame for the next seq, copied in with
    /// `publish` (what every backend takes from host memory).
    fn publish(&mut self, publisher: &mut Publisher) -> cuframes::Result<u64> {
        let frame = publisher.next_seq() - 1;
        let mut planes: Vec<&mut [u8]> = self.planes.iter_mut().map(Vec::as_mut_slice).collect();
        pattern::fill_frame(&self.layout, frame, &mut planes);
        let host: Vec<HostPlane<'_>> = self
            .planes
            .iter()
            .zip(self.layout.planes())
            .map(|(data, p)| HostPlane { data, pitch: p.pitch })
            .collect();
        publisher.publish(&host, frame as i64 * 1000)
    }
}

/// The `publisher` role: the first line is the config; then one call a
/// line. End of input drops the publisher, as the end of a test would.
fn serve_publisher() -> Result<(), String> {
    let mut lines = std::io::stdin().lock().lines();
    let mut out = std::io::stdout().lock();
    let config = decode_config(&read_spec(&mut lines)?)?;
    let mut publisher = match Publisher::create(config) {
        Ok(publisher) => publisher,
        Err(e) => return answer(&mut out, Err(e)),
    };
    answer(
        &mut out,
        Ok(memory_words(publisher.memory(), publisher.cuda_share())),
    )?;
    let mut frame = PatternFrame::new(publisher.layout());
    for line in lines {
        let line = line.map_err(|e| e.to_string())?;
        let words: Vec<&str> = line.split(' ').collect();
        let result = match words.as_slice() {
            ["publish"] => frame.publish(&mut publisher).map(|seq| seq.to_string()),
            ["next_seq"] => Ok(publisher.next_seq().to_string()),
            ["stats"] => {
                let s = publisher.stats();
                Ok(format!(
                    "{} {} {} {} {} {}",
                    s.published,
                    s.ack_timeouts,
                    s.rejected_connections,
                    s.ack_waits,
                    s.ack_wait_ns,
                    s.kernel_copies
                ))
            }
            ["subscriber_count"] => Ok(publisher.subscriber_count().to_string()),
            ["wait_for_subscribers", count, timeout] => publisher
                .wait_for_subscribers(parse(count)?, nanos(timeout)?)
                .map(|()| String::new()),
            ["flush", timeout] => publisher.flush(nanos(timeout)?).map(|()| String::new()),
            ["wait_delivered", timeout] => publisher.wait_delivered(nanos(timeout)?).map(|()| String::new()),
            ["acquire_slot"] => publisher.acquire_slot().map(|target| {
                let kinds = target.planes.iter().map(|p| match p {
                    PlanePtr::Host(_) => " host",
                    PlanePtr::Device(_) => " device",
                });
                format!("{}{}", target.index, kinds.collect::<String>())
            }),
            ["commit_slot", pts] => publisher.commit_slot(parse(pts)?).map(|seq| seq.to_string()),
            ["shutdown"] => {
                drop(publisher);
                return answer(&mut out, Ok(String::new()));
            }
            _ => return Err(format!("unknown call {line:?}")),
        };
        answer(&mut out, result)?;
    }
    Ok(())
}

/// The `subscriber` role: connects, then `take NANOS` takes a frame and
/// holds it (answering its seq and whether it is the pattern frame), until
/// the process is killed or its input ends.
fn serve_subscriber() -> Result<(), String> {
    let mut lines = std::io::stdin().lock().lines();
    let mut out = std::io::stdout().lock();
    let spec = read_spec(&mut lines)?;
    let dir = PathBuf::from(field(&spec, "runtime_dir")?);
    let mut config = subscriber_config(field(&spec, "key")?, &dir, field(&spec, "name")?);
    config.cuda_device = parse(field(&spec, "cuda_device")?)?;
    config.copy = CopyMode::Never;
    let mut sub = match Subscriber::connect(config) {
        Ok(sub) => sub,
        Err(e) => return answer(&mut out, Err(e)),
    };
    answer(
        &mut out,
        Ok(memory_words(sub.info().memory, sub.info().cuda_share())),
    )?;
    let mut held = Vec::new();
    for line in lines {
        let line = line.map_err(|e| e.to_string())?;
        let result = match line.split(' ').collect::<Vec<_>>().as_slice() {
            ["take", timeout] => sub.next(Some(nanos(timeout)?)).map(|lease| {
                let verdict = if lease_matches(&lease) {
                    "matches"
                } else {
                    "differs"
                };
                let words = format!("{} {verdict}", lease.seq());
                held.push(lease);
                words
            }),
            _ => return Err(format!("unknown call {line:?}")),
        };
        answer(&mut out, result)?;
    }
    Ok(())
}
