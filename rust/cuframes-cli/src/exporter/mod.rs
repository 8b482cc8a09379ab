//! `cuframes exporter`: Prometheus metrics for every key on the machine,
//! served over HTTP (`/metrics`, and `/healthz` for the exporter itself) or
//! written for node_exporter's textfile collector.

mod metrics;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuframes::Result;

use crate::args::ExporterArgs;
use crate::bench::invalid;

/// Reads every key's header: the page, and how many keys could not be read.
fn scrape(runtime_dir: Option<&Path>, errors_total: &mut u64) -> String {
    let started = Instant::now();
    let keys: Vec<(String, std::result::Result<cuframes::inspect::Inspection, String>)> =
        cuframes::list_keys(runtime_dir)
            .into_iter()
            .map(|key| {
                let ins = cuframes::inspect::inspect(&key, runtime_dir).map_err(|e| e.to_string());
                (key, ins)
            })
            .collect();
    *errors_total += keys
        .iter()
        .filter(|(_, ins)| match ins {
            Err(_) => true,
            Ok(i) => i.status.has_shm && i.info.is_err(),
        })
        .count() as u64;
    metrics::render(
        &keys,
        metrics::ScrapeStats {
            seconds: started.elapsed().as_secs_f64(),
            errors_total: *errors_total,
        },
    )
}

pub fn run(a: ExporterArgs) -> Result<ExitCode> {
    let runtime_dir = a.runtime_dir.as_deref();
    let mut errors_total = 0;
    if a.once {
        print!("{}", scrape(runtime_dir, &mut errors_total));
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &a.textfile {
        if a.interval.get().is_zero() {
            return Err(invalid("--interval must be above 0"));
        }
        let stop = crate::signals::install();
        while !stop.is_set() {
            write_textfile(path, &scrape(runtime_dir, &mut errors_total))?;
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
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        // One client at a time, each bounded: a stuck client costs the
        // others at most these timeouts.
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = answer(&mut conn, runtime_dir, &mut errors_total);
    }
    Ok(ExitCode::SUCCESS)
}

/// One HTTP/1.0-style exchange: GET /metrics or /healthz, then close.
fn answer(conn: &mut TcpStream, runtime_dir: Option<&Path>, errors_total: &mut u64) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
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
            scrape(runtime_dir, errors_total),
        ),
        ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_owned()),
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".to_owned()),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".to_owned()),
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
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
                    kind_of(&there),
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

/// What a file is, in words, for errors.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_char_device() || ft.is_block_device() {
        "device"
    } else {
        "regular file"
    }
}
