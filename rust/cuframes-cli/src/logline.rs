//! What the CLI says on standard error, as text for people or, with
//! `--log-format json`, one JSON object per line for log collectors:
//! `{"time", "level", "key", "event", "message", "fields"}`. The library's
//! own messages (a fallback it took, a file it skipped) come the same way,
//! through its logger.

use std::sync::OnceLock;

use serde_json::{Value, json};

pub use cuframes::log::Level;

/// How lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `cuframes: message`.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Chooses the format for the process and routes the library's messages
/// through it.
pub fn init(format: LogFormat) {
    let _ = FORMAT.set(format);
    cuframes::log::set_logger(Some(cuframes::log::Logger::new(|level, message| {
        event(level, None, "library", message, Value::Null);
    })));
}

/// One line: `event` names what happened, `fields` (an object, or null)
/// carries its figures in JSON; text shows the message alone. Each line
/// goes out in one write: a process killed (or another thread logging)
/// never leaves half a line, which a collector could not parse.
pub fn event(level: Level, key: Option<&str>, event: &str, message: &str, fields: Value) {
    let line = match FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Text => match level {
            Level::Error => format!("cuframes: error: {message}\n"),
            Level::Warning => format!("cuframes: warning: {message}\n"),
            _ => format!("cuframes: {message}\n"),
        },
        LogFormat::Json => {
            let object = json!({
                "time": rfc3339_now(),
                "level": level.name(),
                "key": key,
                "event": event,
                "message": message,
                "fields": if fields.is_null() { json!({}) } else { fields },
            });
            format!("{object}\n")
        }
    };
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}

/// Now in UTC as RFC 3339 with milliseconds (`2026-12-04T03:23:58.123Z`).
fn rfc3339_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(now.as_secs(), now.subsec_millis())
}

fn rfc3339(secs: u64, millis: u32) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn civil_dates() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_796_354_638, 123), "2026-12-04T03:23:58.123Z");
    }
}
