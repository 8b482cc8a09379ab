//! `cuframes exporter`: Prometheus metrics for every key on the machine,
//! served over HTTP (`/metrics`, and `/healthz` for the exporter itself) or
//! written for node_exporter's textfile collector.

mod metrics;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cuframes::Result;
use cuframes::inspect::Inspection;

use crate::args::ExporterArgs;
use crate::args::invalid;

/// The longest one key's header may take to read: a publisher asked for it
/// over its socket that has not answered by then makes the key a scrape
/// error (well under Prometheus's default scrape timeout of 10 s).
pub const KEY_TIMEOUT: Duration = Duration::from_millis(500);
/// Keys read at once.
pub const READERS: usize = 16;
/// The most one scrape spends reading keys: a key not started by then is a
/// scrape error (so 160 publishers that never answer still end a scrape in
/// about 5.5 s).
pub const SCRAPE_BUDGET: Duration = Duration::from_secs(5);
/// HTTP clients served at once; more wait in the listen backlog.
pub const MAX_CLIENTS: usize = 32;
/// Time a client has to send its request, and then to take the answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// A key and its inspection, or why it could not be inspected.
type KeyRead = (String, std::result::Result<Inspection, String>);

/// Reads every key's header and renders the page; counts the keys it could
/// not read. Shared by the HTTP clients' threads.
struct Scraper {
    runtime_dir: Option<PathBuf>,
    errors_total: AtomicU64,
    /// The last page and when it was done: a request that arrives while a
    /// scrape is under way takes that scrape's page.
    last: Mutex<Option<(Instant, String)>>,
    /// Why each key was unreadable at the last scrape, as logged.
    told: Mutex<HashMap<String, String>>,
}

impl Scraper {
    fn new(runtime_dir: Option<PathBuf>) -> Scraper {
        Scraper {
            runtime_dir,
            errors_total: AtomicU64::new(0),
            last: Mutex::new(None),
            told: Mutex::new(HashMap::new()),
        }
    }

    /// A page no older than this call.
    fn page(&self) -> String {
        let asked = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((done, page)) = last.as_ref()
            && *done >= asked
        {
            return page.clone();
        }
        let page = self.scrape();
        *last = Some((Instant::now(), page.clone()));
        page
    }

    fn scrape(&self) -> String {
        let started = Instant::now();
        let dir = self.runtime_dir.as_deref();
        let keys = read_keys(cuframes::list_keys(dir), dir, started + SCRAPE_BUDGET);
        let errors = keys.iter().filter(|(_, ins)| metrics::unreadable(ins)).count() as u64;
        self.log_unreadable(&keys);
        let errors_total = self.errors_total.fetch_add(errors, Ordering::Relaxed) + errors;
        metrics::render(
            &keys,
            metrics::ScrapeStats {
                seconds: started.elapsed().as_secs_f64(),
                errors_total,
            },
        )
    }
}

impl Scraper {
    /// Logs why each unreadable key was skipped, once per key and reason
    /// (a scrape every few seconds would repeat it for ever).
    fn log_unreadable(&self, keys: &[KeyRead]) {
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        let now: HashMap<&str, &str> = keys
            .iter()
            .filter_map(|(key, ins)| metrics::why_unreadable(ins).map(|why| (key.as_str(), why)))
            .collect();
        for (key, why) in &now {
            if told.get(*key).is_none_or(|before| before != why) {
                crate::logline::event(
                    crate::logline::Level::Warning,
                    None,
                    "key_unreadable",
                    &format!("exporter skips key '{key}': {why}"),
                    serde_json::json!({"key": key, "reason": why}),
                );
            }
        }
        *told = now
            .into_iter()
            .map(|(k, w)| (k.to_owned(), w.to_owned()))
            .collect();
    }
}

/// Inspects `keys`, [`READERS`] at a time, each within [`KEY_TIMEOUT`] and
/// none started after `budget_end`.
fn read_keys(keys: Vec<String>, runtime_dir: Option<&Path>, budget_end: Instant) -> Vec<KeyRead> {
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<std::result::Result<Inspection, String>>>> =
        keys.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..READERS.min(keys.len()) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(key) = keys.get(index) else { break };
                    let left = budget_end.saturating_duration_since(Instant::now());
                    let read = if left.is_zero() {
                        Err(format!(
                            "not read: the scrape's {} s were spent on other keys",
                            SCRAPE_BUDGET.as_secs()
                        ))
                    } else {
                        cuframes::inspect::inspect_within(key, runtime_dir, KEY_TIMEOUT.min(left))
                            .map_err(|e| e.to_string())
                    };
                    *results[index].lock().unwrap_or_else(PoisonError::into_inner) = Some(read);
                }
            });
        }
    });
    keys.into_iter()
        .zip(results)
        .map(|(key, read)| {
            let read = read
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .unwrap_or_else(|| Err("not read: its reader failed".to_owned()));
            (key, read)
        })
        .collect()
}

pub fn run(a: ExporterArgs) -> Result<ExitCode> {
    let scraper = Arc::new(Scraper::new(a.runtime_dir.clone()));
    if a.once {
        print!("{}", scraper.scrape());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &a.textfile {
        if a.interval.get().is_zero() {
            return Err(invalid("--interval must be above 0"));
        }
        let stop = crate::signals::install();
        while !stop.is_set() {
            write_textfile(path, &scraper.scrape())?;
            let next = Instant::now() + a.interval.get();
            while !stop.is_set() && Instant::now() < next {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let listener = TcpListener::bind(&a.listen)
        .map_err(|e| cuframes::Error::io(format!("listening on {}", a.listen), &e))?;
    let address = listener
        .local_addr()
        .map_or_else(|_| a.listen.clone(), |at| at.to_string());
    // Through the logger: one JSON object under --log-format json.
    crate::logline::event(
        crate::logline::Level::Info,
        None,
        "serving",
        &format!("exporter serving http://{address}/metrics"),
        serde_json::json!({"listen": address}),
    );
    // Each client on a thread of its own, at most MAX_CLIENTS at once: a
    // slow or silent client holds up no other, and costs its own thread at
    // most REQUEST_TIMEOUT + ANSWER_TIMEOUT.
    let clients = Arc::new((Mutex::new(0usize), Condvar::new()));
    loop {
        {
            let (count, freed) = &*clients;
            let mut n = count.lock().unwrap_or_else(PoisonError::into_inner);
            while *n >= MAX_CLIENTS {
                n = freed.wait(n).unwrap_or_else(PoisonError::into_inner);
            }
            *n += 1;
        }
        let done = {
            let clients = clients.clone();
            move || {
                let (count, freed) = &*clients;
                *count.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
                freed.notify_one();
            }
        };
        let Ok((mut conn, _)) = listener.accept() else {
            done();
            continue;
        };
        let scraper = scraper.clone();
        let spawned = std::thread::Builder::new()
            .name("http client".into())
            .spawn(move || {
                let _ = answer(&mut conn, &scraper);
                done();
            });
        if spawned.is_err() {
            // No thread for it (the connection was dropped with the closure).
            let (count, freed) = &*clients;
            *count.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
            freed.notify_one();
        }
    }
}

/// One HTTP/1.0-style exchange: GET /metrics or /healthz, then close. The
/// request must arrive within [`REQUEST_TIMEOUT`] and the answer be taken
/// within [`ANSWER_TIMEOUT`], however the client trickles.
fn answer(conn: &mut TcpStream, scraper: &Scraper) -> std::io::Result<()> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        conn.set_read_timeout(Some(time_left(deadline)?))?;
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            scraper.page(),
        ),
        ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_owned()),
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".to_owned()),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".to_owned()),
    };
    let whole = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    let mut left = whole.as_bytes();
    while !left.is_empty() {
        conn.set_write_timeout(Some(time_left(deadline)?))?;
        let n = conn.write(left)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        left = &left[n..];
    }
    conn.flush()
}

/// The time until `deadline`, or TimedOut once it passed.
fn time_left(deadline: Instant) -> std::io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(std::io::ErrorKind::TimedOut.into())
    } else {
        Ok(left)
    }
}

/// Writes `page` to `path` whole: a temporary file beside it
/// (`<path>.prom.tmp`, see [`temporary_name`]), renamed over it
/// (node_exporter never reads half a file).
///
/// The directory may be one others write (node_exporter's textfile
/// directory), so the temporary file is made new (`O_CREAT | O_EXCL`),
/// never through a link (`O_NOFOLLOW`) and never waiting on a FIFO
/// (`O_NONBLOCK`): a stale one is removed only when it is a regular file
/// of ours (an exporter killed mid-write); anything else there is refused,
/// naming it.
fn write_textfile(path: &Path, page: &str) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let tmp = temporary_name(path);
    let shown = tmp.display();
    if let Ok(there) = std::fs::symlink_metadata(&tmp) {
        let ours = there.uid() == nix::unistd::geteuid().as_raw();
        if !there.file_type().is_file() || !ours {
            return Err(cuframes::Error::new(
                cuframes::ErrorKind::Permission,
                format!(
                    "the textfile's temporary name {shown} holds a {} of uid {}, not a file this exporter left: refusing to write through it (remove it)",
                    cuframes::file_kind(&there),
                    there.uid()
                ),
            ));
        }
        std::fs::remove_file(&tmp)
            .map_err(|e| cuframes::Error::io(format!("removing the stale {shown}"), &e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| cuframes::Error::io(format!("creating {shown} (O_EXCL, O_NOFOLLOW)"), &e))?;
    let written = file
        .write_all(page.as_bytes())
        .and_then(|()| file.sync_data())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(cuframes::Error::io(
            format!("writing {} (through {shown})", path.display()),
            &e,
        ));
    }
    Ok(())
}

/// `<path>.prom.tmp` beside `path` (`cuframes.prom` → `cuframes.prom.tmp`):
/// not a `*.prom` name, so node_exporter never reads it.
fn temporary_name(path: &Path) -> PathBuf {
    path.with_extension("prom.tmp")
}
