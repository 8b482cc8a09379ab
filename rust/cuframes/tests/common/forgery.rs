//! A peer that writes the shared header as protocol v1 lets every
//! subscriber do (forged seqs, a forged `global_seq`, forged ACKs), beside an
//! honest subscriber that must keep getting every frame right: the attacks
//! of `trust.rs` (another user's, as root) and of the suite over every
//! backend (`every_backend/trust.rs`, this user's).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cuframes::ErrorKind;

use super::backend::{Backend, PublisherProcess};
use super::{lease_matches, unique_key, within};

/// The key's shared header opened read-write by name, as a protocol-v1
/// subscriber has it.
pub fn header_file(key: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/dev/shm/cuframes-{key}"))
        .expect("open the shared header")
}

/// Spec §2 offsets in the shared header: `global_seq`, slot descriptor
/// `index`, and `ack_bitmap` in a descriptor.
pub const GLOBAL_SEQ: u64 = 0xC0;
pub const fn slot(index: u64) -> u64 {
    0x100 + index * 192
}
pub const SLOT_ACK: u64 = 0x10;

pub fn read_u64(file: &std::fs::File, offset: u64) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 8];
    file.read_exact_at(&mut b, offset).unwrap();
    u64::from_le_bytes(b)
}

pub fn write_u64(file: &std::fs::File, offset: u64, value: u64) {
    use std::os::unix::fs::FileExt;
    file.write_all_at(&value.to_le_bytes(), offset).unwrap();
}

/// What one attack does to the header, over and over, until stopped.
#[derive(Clone, Copy, Debug)]
pub enum Forgery {
    /// Relabels the oldest slot as the next frame and moves `global_seq`
    /// to match: a stale picture under a new seq.
    Relabel,
    /// `global_seq` and every slot seq set far ahead (2^62).
    FarAhead,
    /// Every subscriber's ACK bit in every slot.
    Acks,
}

pub fn forge(file: &std::fs::File, ring: u64, forgery: Forgery) {
    match forgery {
        Forgery::Relabel => {
            let global = read_u64(file, GLOBAL_SEQ);
            let seqs: Vec<u64> = (0..ring).map(|s| read_u64(file, slot(s))).collect();
            if let Some(oldest) = (0..ring as usize)
                .filter(|&s| seqs[s] != u64::MAX)
                .min_by_key(|&s| seqs[s])
            {
                write_u64(file, slot(oldest as u64), global + 1);
                write_u64(file, GLOBAL_SEQ, global + 1);
            }
        }
        Forgery::FarAhead => {
            for s in 0..ring {
                write_u64(file, slot(s), 1 << 62);
            }
            write_u64(file, GLOBAL_SEQ, 1 << 62);
        }
        Forgery::Acks => {
            for s in 0..ring {
                write_u64(file, slot(s) + SLOT_ACK, 0xFFFF_FFFE);
            }
        }
    }
}

/// What the honest subscriber saw beside an attack.
#[derive(Debug, Default)]
pub struct Seen {
    pub received: u64,
    pub mismatched: u64,
    pub dropped: u64,
    pub overwritten: u64,
    pub published: u64,
    /// What an attacker process printed.
    pub attacker: String,
}

/// Where the attack runs: a thread of this process writing the header by
/// name, or another process (another user's) started with the key.
pub enum Attacker {
    Thread(Forgery),
    Process(Box<StartAttacker>),
}

/// Starts an attacker process for a key and its runtime directory's parent.
pub type StartAttacker = dyn FnOnce(&str, &Path) -> std::process::Child;

/// A `backend` publisher (`cfg`, ring 4) publishing pattern frames, an attacker
/// forging all the while, and an honest verifying subscriber that takes
/// `hold` with each frame: what the honest one saw of `frames` frames.
pub fn beside(
    backend: Backend,
    attacker: Attacker,
    cfg: impl FnOnce(&str, &Path) -> cuframes::PublisherConfig,
    hold: Duration,
    frames: u64,
) -> Seen {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("forge");
    let mut cfg = cfg(&key, dir.path());
    cfg.ring_size = 4;
    let policy = cfg.policy;
    let rt = cfg.runtime_dir.clone().expect("a runtime directory");
    let publisher = backend.publisher(cfg);
    let mut honest = backend.subscribe(&key, &rt, "honest");
    let stop = Arc::new(AtomicBool::new(false));
    let (thread, mut process) = start_attack(attacker, &key, dir.path(), &stop);
    let publishing = publish_up_to(publisher, stop.clone(), frames);
    let mut seen = read_honestly(&mut honest, hold, frames, &publishing);
    stop.store(true, Ordering::Relaxed);
    if let Some(thread) = thread {
        thread.join().unwrap();
    }
    if let Some((child, said)) = process.as_mut() {
        let _ = child.kill();
        seen.attacker = format!("{said}{}", child.wait_with_output_now());
    }
    let mut publisher = publishing.join().unwrap();
    let stats = honest.stats();
    seen.dropped = stats.dropped;
    seen.overwritten = stats.overwritten;
    seen.published = publisher.next_seq() - 1;
    eprintln!("{backend:?}, under {policy:?}: {seen:?}");
    seen
}

/// An attack under way: a thread forging `key`'s header until `stop`, or an
/// attacker process with what it said as it started.
type Attack = (Option<JoinHandle<()>>, Option<(std::process::Child, String)>);

/// Starts `attacker` on `key` (runtime directory's parent `dir`).
fn start_attack(attacker: Attacker, key: &str, dir: &Path, stop: &Arc<AtomicBool>) -> Attack {
    match attacker {
        Attacker::Thread(forgery) => {
            let file = header_file(key);
            let stop = stop.clone();
            let thread = std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    forge(&file, 4, forgery);
                    std::thread::sleep(Duration::from_micros(50));
                }
            });
            (Some(thread), None)
        }
        Attacker::Process(start) => {
            let mut child = start(key, dir);
            let said = started_attacking(&mut child);
            (None, Some((child, said)))
        }
    }
}

/// A thread publishing pattern frames every 0.3 ms until `stop` or past
/// seq `frames`; it hands the publisher back.
fn publish_up_to(
    mut publisher: PublisherProcess,
    stop: Arc<AtomicBool>,
    frames: u64,
) -> JoinHandle<PublisherProcess> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) && publisher.next_seq() <= frames {
            publisher.publish_pattern();
            std::thread::sleep(Duration::from_micros(300));
        }
        publisher
    })
}

/// The honest subscriber reads, taking `hold` with each frame, until frame
/// `frames`, a timeout once `publishing` ended, or 20 s; panics on any
/// error but a timeout. What it received, and how many did not match.
fn read_honestly(
    honest: &mut cuframes::Subscriber,
    hold: Duration,
    frames: u64,
    publishing: &JoinHandle<PublisherProcess>,
) -> Seen {
    let mut seen = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match honest.next(Some(Duration::from_millis(500))) {
            Ok(lease) => {
                seen.received += 1;
                if !lease_matches(&lease) {
                    seen.mismatched += 1;
                }
                std::thread::sleep(hold);
                let last = lease.seq() >= frames;
                let _ = lease.release();
                if last {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Timeout => {
                if publishing.is_finished() {
                    break;
                }
            }
            Err(e) => panic!("the honest subscriber failed: {e}"),
        }
    }
    seen
}

/// Waits (at most 20 s) for an attacker process to say it is attacking;
/// returns what it said up to then.
pub fn started_attacking(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let out = child.stdout.take().expect("piped");
    let said = within(Duration::from_secs(20), move || {
        let mut said = String::new();
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            said.push_str(&line);
            said.push('\n');
            if line.starts_with("attacking") {
                break;
            }
        }
        said
    });
    said.unwrap_or_else(|| "(said nothing in 20 s)\n".into())
}

/// The output of a child that was just killed (or had exited).
pub trait KilledOutput {
    fn wait_with_output_now(&mut self) -> String;
}

impl KilledOutput for std::process::Child {
    fn wait_with_output_now(&mut self) -> String {
        use std::io::Read;
        let _ = self.wait();
        let mut text = String::new();
        if let Some(out) = self.stdout.as_mut() {
            let _ = out.read_to_string(&mut text);
        }
        if let Some(err) = self.stderr.as_mut() {
            let _ = err.read_to_string(&mut text);
        }
        text
    }
}
