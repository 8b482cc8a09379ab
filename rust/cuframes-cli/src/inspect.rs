//! `cuframes ls`, `inspect` and `cleanup`: shared memory read without
//! connecting, and removal of what dead publishers left.

use std::process::ExitCode;

use cuframes::inspect::{Inspection, inspect as inspect_key};
use cuframes::protocol::{
    SEQ_INVALID, SUBSCRIBER_ACTIVE, SUBSCRIBER_CONNECTING, SUBSCRIBER_DRAINING, SharedHeader,
};
use cuframes::{Error, ErrorKind, Policy, Result};
use cuframes::{cleanup_key, list_keys};
use serde_json::{Value, json};

use crate::args::{CleanupArgs, InspectArgs, LsArgs, policy_name};

fn state_name(live: bool, ins: &Inspection) -> &'static str {
    match (live, ins.header.is_some()) {
        (true, _) => "live",
        (false, true) => "stale",
        (false, false) if ins.status.has_shm => "stale (unreadable)",
        (false, false) => "stale (no shm)",
    }
}

fn summary(ins: &Inspection) -> Value {
    let mut v = json!({
        "key": ins.status.paths.key,
        "state": state_name(ins.status.live, ins),
        "socket": ins.status.paths.socket.display().to_string(),
        "shm": format!("/dev/shm{}", ins.status.paths.shm_name),
    });
    if let Some(h) = &ins.header {
        v["producer_pid"] = json!(h.producer_pid);
        v["global_seq"] = json!(h.global_seq);
        v["subscribers"] = json!((h.subscriber_bitmap as u32).count_ones());
        v["shutdown"] = json!(h.shutdown_flag != 0);
    }
    match &ins.info {
        Ok(info) => {
            v["format"] = json!(info.layout.format().name());
            v["width"] = json!(info.layout.width());
            v["height"] = json!(info.layout.height());
            v["ring_size"] = json!(info.ring_size);
            v["policy"] = json!(Policy::from_wire(info.policy).map_or("?", policy_name));
            v["memory"] = json!(info.memory.name());
            v["cuda_share"] = json!(info.cuda_share().map(|share| share.name()));
            v["fps"] = json!(info.fps.map(|(n, d)| n as f64 / d as f64));
            v["frame_bytes"] = json!(info.layout.size());
        }
        Err(e) => v["invalid"] = json!(e),
    }
    v
}

pub fn ls(a: LsArgs) -> Result<ExitCode> {
    let mut rows = Vec::new();
    // Keys listed without all their columns, and why (said under the table).
    let mut notes = Vec::new();
    for key in list_keys(None) {
        match inspect_key(&key, None) {
            Ok(ins) => {
                if let Some(why) = ins.unreadable_reason() {
                    notes.push(format!("{key}: {why}"));
                }
                rows.push(summary(&ins));
            }
            Err(e) => notes.push(format!("{key}: skipped: {e}")),
        }
    }
    for note in &notes {
        eprintln!("cuframes: {note}");
    }
    if a.json {
        println!("{}", Value::Array(rows));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no keys");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<24} {:<6} {:<8} {:>11} {:>4} {:<12} {:<5} {:>4} {:>12} {:>8}",
        "KEY", "STATE", "FORMAT", "SIZE", "RING", "POLICY", "MEM", "SUBS", "SEQ", "PID"
    );
    for r in rows {
        // "-" where the header could not be read (see `inspect KEY`).
        let text = |k: &str| match &r[k] {
            Value::Null => "-".to_owned(),
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        println!(
            "{:<24} {:<6} {:<8} {:>11} {:>4} {:<12} {:<5} {:>4} {:>12} {:>8}",
            text("key"),
            text("state"),
            text("format"),
            if r["width"].is_null() {
                "-".to_owned()
            } else {
                format!("{}x{}", r["width"], r["height"])
            },
            text("ring_size"),
            text("policy"),
            text("memory"),
            text("subscribers"),
            text("global_seq"),
            text("producer_pid"),
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn subscriber_state(state: u64) -> String {
    match state {
        SUBSCRIBER_CONNECTING => "connecting".into(),
        SUBSCRIBER_ACTIVE => "active".into(),
        SUBSCRIBER_DRAINING => "draining".into(),
        other => format!("unknown({other})"),
    }
}

pub fn inspect(a: InspectArgs) -> Result<ExitCode> {
    let ins = inspect_key(&a.key, None)?;
    if ins.header.is_none() && !ins.status.has_socket && !ins.status.has_lock {
        // A name in /dev/shm alone that is no header: say what is wrong with it.
        let why = match &ins.info {
            Err(e) if ins.status.has_shm => format!(" ({e})"),
            _ => String::new(),
        };
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("no publisher for key '{}'{why}", a.key),
        ));
    }
    let mut v = summary(&ins);
    if let Some(h) = &ins.header {
        add_header_details(&mut v, &ins, h);
    }
    if a.json {
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("key        {}  ({})", a.key, v["state"].as_str().unwrap_or("?"));
    println!("socket     {}", v["socket"].as_str().unwrap_or(""));
    println!("shm        {}", v["shm"].as_str().unwrap_or(""));
    if let Err(e) = &ins.info {
        println!("header     INVALID: {e}");
    }
    if let Some(h) = &ins.header {
        print_header(&v, &ins, h);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `inspect` adds to `ls`'s summary from a readable header: versions,
/// every slot of the ring and every subscriber record.
fn add_header_details(v: &mut Value, ins: &Inspection, h: &SharedHeader) {
    let live = ins.info.as_ref().map_or(
        h.ring_size.min(cuframes::protocol::MAX_RING_SIZE as u64) as usize,
        |i| i.ring_size,
    );
    let slots: Vec<Value> = h.slots[..live]
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "slot": i,
                "seq": if s.seq == SEQ_INVALID { Value::Null } else { json!(s.seq) },
                "pts_ns": s.pts_ns,
                "ack_bitmap": format!("0x{:08x}", s.ack_bitmap),
                "written_bytes": s.written_bytes,
            })
        })
        .collect();
    let subs: Vec<Value> = ins
        .subscribers()
        .iter()
        .map(|s| {
            json!({
                "bit": s.bit,
                "state": subscriber_state(s.state),
                "pid": s.pid,
                "name": s.name,
                "last_seen_seq": s.last_seen_seq,
                "lag": h.global_seq.saturating_sub(s.last_seen_seq),
                "last_ack_ns": s.last_ack_ns,
            })
        })
        .collect();
    v["proto_version"] = json!(h.proto_version);
    v["lib_version"] = json!(format!(
        "{}.{}.{}",
        h.lib_version_major, h.lib_version_minor, h.lib_version_patch
    ));
    v["subscriber_bitmap"] = json!(format!("0x{:08x}", h.subscriber_bitmap));
    v["slots"] = Value::Array(slots);
    v["subscriber_slots"] = Value::Array(subs);
}

/// The text of a readable header: versions, the stream, slots, subscribers.
fn print_header(v: &Value, ins: &Inspection, h: &SharedHeader) {
    println!(
        "header     protocol v{}, library {}, publisher pid {}, shutdown {}",
        h.proto_version,
        v["lib_version"].as_str().unwrap_or(""),
        h.producer_pid,
        h.shutdown_flag
    );
    if ins.info.is_ok() {
        println!(
            "frames     {} {}x{}, {} bytes, ring {}, {}, {} memory, fps {}",
            v["format"].as_str().unwrap_or(""),
            v["width"],
            v["height"],
            v["frame_bytes"],
            v["ring_size"],
            v["policy"].as_str().unwrap_or(""),
            v["memory"].as_str().unwrap_or(""),
            v["fps"]
        );
    }
    println!(
        "global_seq {}   subscribers 0x{:08x}",
        h.global_seq, h.subscriber_bitmap
    );
    for s in v["slots"].as_array().into_iter().flatten() {
        println!(
            "  slot {:>2}  seq {:>10}  pts {:>14}  acks {}",
            s["slot"],
            s["seq"],
            s["pts_ns"],
            s["ack_bitmap"].as_str().unwrap_or("")
        );
    }
    for s in v["subscriber_slots"].as_array().into_iter().flatten() {
        println!(
            "  sub {:>2}  {:<10} pid {:>7}  {:<31} last_seen {:>10}  lag {}",
            s["bit"],
            s["state"].as_str().unwrap_or(""),
            s["pid"],
            s["name"].as_str().unwrap_or(""),
            s["last_seen_seq"],
            s["lag"]
        );
    }
}

pub fn cleanup(a: CleanupArgs) -> Result<ExitCode> {
    let keys = match &a.key {
        Some(key) => vec![key.clone()],
        None => list_keys(None),
    };
    let mut live = Vec::new();
    let mut removed_any = false;
    let mut skipped_any = false;
    for key in &keys {
        match cleanup_key(key, None) {
            Ok(removed) => {
                for item in &removed {
                    println!("removed {item}");
                }
                removed_any |= !removed.is_empty();
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => live.push(key.clone()),
            // What is not ours (another user's file, a FIFO planted at a
            // name) is never removed, and is no failure of cleanup.
            Err(e) if e.kind() == ErrorKind::Permission => {
                println!("skipped key '{key}': {e}");
                skipped_any = true;
            }
            Err(e) => return Err(e),
        }
    }
    for key in &live {
        println!("key '{key}' is live; left alone");
    }
    if !removed_any && !skipped_any && live.is_empty() {
        println!("nothing to clean up");
    }
    if a.key.is_some() && !live.is_empty() {
        return Err(Error::new(
            ErrorKind::AlreadyExists,
            format!("key '{}' is published by a live process; not removed", live[0]),
        ));
    }
    Ok(ExitCode::SUCCESS)
}
