//! Durations on the command line, spelled as FFmpeg spells its duration
//! options (`AV_OPT_TYPE_DURATION`, the muxer's `-ack_timeout` and the input
//! device's `-timeout`): `5` or `5s` is five seconds, `500ms` half a second,
//! `250us` a quarter of a millisecond, `0.25` a quarter of a second,
//! `01:30` and `00:01:30` ninety seconds. Negative durations (FFmpeg's
//! "forever") are refused: every wait of the CLI is bounded.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The longest duration accepted: about 31 years, far below what makes
/// `Instant + Duration` overflow.
pub const MAX_SECONDS: u64 = 1_000_000_000;

/// A parsed command-line duration (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// A duration of `ms` milliseconds (the options this one replaced took ms).
    pub fn from_millis(ms: u64) -> Result<Dur, String> {
        if ms / 1000 > MAX_SECONDS {
            return Err(format!("{ms} ms is too long (at most {MAX_SECONDS} s)"));
        }
        Ok(Dur(Duration::from_millis(ms)))
    }

    pub fn get(self) -> Duration {
        self.0
    }
}

const SYNTAX: &str = "a duration is 5 or 5s (seconds), 500ms, 250us, 0.25 or [HH:]MM:SS[.frac]";

fn digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `S+[.m+]` as whole units and nanoseconds of a unit of `unit_ns`.
fn decimal(text: &str, unit_ns: u128) -> Option<u128> {
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (text, None),
    };
    if !digits(whole) || frac.is_some_and(|f| !digits(f)) {
        return None;
    }
    // More digits than fit are too long anyway (caught below).
    let whole: u128 = whole.parse().ok()?;
    let mut ns = whole.checked_mul(unit_ns)?;
    if let Some(frac) = frac {
        // Digits past the nanosecond are dropped (FFmpeg keeps microseconds).
        let mut scale = unit_ns;
        for b in frac.bytes() {
            scale /= 10;
            ns += u128::from(b - b'0') * scale;
        }
    }
    Some(ns)
}

/// `[HH:]MM:SS[.frac]` in nanoseconds; minutes and seconds below 60.
fn clock(text: &str) -> Option<u128> {
    let parts: Vec<&str> = text.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [m, s] => ("0", *m, *s),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    if !digits(hours) || !digits(minutes) || minutes.len() > 2 {
        return None;
    }
    let whole_seconds = seconds.split_once('.').map_or(seconds, |(w, _)| w);
    if whole_seconds.len() > 2 {
        return None;
    }
    let hours: u128 = hours.parse().ok()?;
    let minutes: u128 = minutes.parse().ok()?;
    let seconds = decimal(seconds, 1_000_000_000)?;
    if minutes >= 60 || seconds >= 60_000_000_000 {
        return None;
    }
    Some((hours * 60 + minutes) * 60_000_000_000 + seconds)
}

impl FromStr for Dur {
    type Err = String;

    fn from_str(text: &str) -> Result<Dur, String> {
        let ns = if text.starts_with('-') {
            return Err(format!("'{text}' is negative; every wait here is bounded"));
        } else if text.contains(':') {
            clock(text)
        } else if let Some(n) = text.strip_suffix("ms") {
            decimal(n, 1_000_000)
        } else if let Some(n) = text.strip_suffix("us") {
            decimal(n, 1_000)
        } else {
            decimal(text.strip_suffix('s').unwrap_or(text), 1_000_000_000)
        };
        let ns = ns.ok_or_else(|| format!("'{text}' is not a duration: {SYNTAX}"))?;
        if ns > u128::from(MAX_SECONDS) * 1_000_000_000 {
            return Err(format!("'{text}' is too long (at most {MAX_SECONDS} s)"));
        }
        Ok(Dur(Duration::from_nanos(ns as u64)))
    }
}

/// The shortest exact spelling: `5s`, `500ms`, `250us`, `1.5s`, `0s`.
impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns == 0 {
            write!(f, "0s")
        } else if ns.is_multiple_of(1_000_000_000) {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns.is_multiple_of(1_000_000) && ns < 1_000_000_000 {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns.is_multiple_of(1_000) && ns < 1_000_000 {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{}s", self.0.as_secs_f64())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> u128 {
        text.parse::<Dur>()
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .0
            .as_millis()
    }

    #[test]
    fn ffmpeg_spellings() {
        assert_eq!(ms("5"), 5000);
        assert_eq!(ms("5s"), 5000);
        assert_eq!(ms("500ms"), 500);
        assert_eq!(ms("0.25"), 250);
        assert_eq!(ms("1.5s"), 1500);
        assert_eq!(ms("2.5ms"), 2);
        assert_eq!("250us".parse::<Dur>().unwrap().0, Duration::from_micros(250));
        assert_eq!(ms("00:01:30"), 90_000);
        assert_eq!(ms("01:30"), 90_000);
        assert_eq!(ms("1:30"), 90_000);
        assert_eq!(ms("100:00:00"), 360_000_000);
        assert_eq!(ms("00:00:01.5"), 1500);
        assert_eq!(ms("0"), 0);
        assert_eq!(ms("0s"), 0);
        assert_eq!(ms("1000000000"), 1_000_000_000_000);
    }

    #[test]
    fn bad_durations_are_refused() {
        for bad in [
            "",
            ".5",
            "s",
            "ms",
            "x",
            "5 s",
            " 5",
            "5x",
            "5m",
            "5min",
            "5h",
            "1e3",
            "5.",
            "5..0",
            "1.2.3",
            "-1",
            "-0.5s",
            "1:2:3:4",
            ":30",
            "1:",
            "1:60",
            "60:00",
            "1:02:60",
            "1:2:3.",
            "001:30",
            "1:030",
            "1000000001",
            "99999999999999999999999999999999999999999",
            "+5",
            "5s5",
            "0x10",
            "١",
        ] {
            assert!(bad.parse::<Dur>().is_err(), "'{bad}' was accepted");
        }
        let e = "-1".parse::<Dur>().unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = "5min".parse::<Dur>().unwrap_err();
        assert!(e.contains("500ms"), "the message shows the syntax: {e}");
        let e = "1000000001".parse::<Dur>().unwrap_err();
        assert!(e.contains("too long"), "{e}");
        assert!(Dur::from_millis(u64::MAX).is_err());
    }

    #[test]
    fn shown_as_typed() {
        for (text, shown) in [
            ("5", "5s"),
            ("0.5", "500ms"),
            ("250us", "250us"),
            ("1.5", "1.5s"),
            ("0", "0s"),
            ("00:01:30", "90s"),
        ] {
            assert_eq!(text.parse::<Dur>().unwrap().to_string(), shown);
        }
    }
}
