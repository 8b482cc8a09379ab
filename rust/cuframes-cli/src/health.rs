//! `cuframes health KEY`: for liveness and readiness probes. Exit 0 when a
//! live publisher of the key published within `--max-age` (and, with
//! `--subscriber`, that subscriber is no further behind than `--max-lag`
//! frames and released a frame within `--max-age`); else exit 1 with one
//! line saying why. Reads the shared header only: no subscription.

use std::process::ExitCode;

use cuframes::Result;
use cuframes::protocol::SUBSCRIBER_ACTIVE;

use crate::args::HealthArgs;
use crate::args::invalid;

pub fn run(a: HealthArgs) -> Result<ExitCode> {
    if a.max_age.get().is_zero() {
        return Err(invalid("--max-age must be above 0"));
    }
    match verdict(&a) {
        Ok(fine) => {
            println!("ok: {fine}");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            println!("unhealthy: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn verdict(a: &HealthArgs) -> std::result::Result<String, String> {
    let key = &a.key;
    let max_age = a.max_age.get().as_secs_f64();
    let ins = cuframes::inspect::inspect(key, a.runtime_dir.as_deref()).map_err(|e| e.to_string())?;
    if !ins.status.live {
        return Err(format!("no live publisher for '{key}'"));
    }
    let header = ins
        .header
        .as_ref()
        .ok_or_else(|| format!("the shared header of '{key}' cannot be read"))?;
    ins.info
        .as_ref()
        .map_err(|e| format!("the shared header of '{key}' does not validate: {e}"))?;
    let age = ins
        .newest_frame_age_ns()
        .ok_or_else(|| format!("'{key}' has published no frame yet"))? as f64
        / 1e9;
    if age > max_age {
        return Err(format!(
            "'{key}' published its last frame {age:.1} s ago (--max-age {})",
            a.max_age
        ));
    }
    let Some(name) = &a.subscriber else {
        return Ok(format!("'{key}' published {age:.3} s ago"));
    };
    let subs = ins.subscribers();
    let sub = subs
        .iter()
        .find(|s| &s.name == name && s.state == SUBSCRIBER_ACTIVE)
        .ok_or_else(|| format!("no active subscriber '{name}' of '{key}'"))?;
    let lag = header.global_seq.saturating_sub(sub.last_seen_seq);
    if lag > a.max_lag {
        return Err(format!(
            "subscriber '{name}' of '{key}' is {lag} frames behind (--max-lag {})",
            a.max_lag
        ));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let ack_age = (now - sub.last_ack_ns).max(0) as f64 / 1e9;
    if lag > 0 && ack_age > max_age {
        return Err(format!(
            "subscriber '{name}' of '{key}' last released a frame {ack_age:.1} s ago (--max-age {})",
            a.max_age
        ));
    }
    Ok(format!(
        "'{key}' published {age:.3} s ago; '{name}' is {lag} frames behind"
    ))
}
