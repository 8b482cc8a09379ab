//! `cuframes bench` as a real process: it starts its own subscriber
//! processes for each transport (host memory here; CUDA runs on the GPU
//! machine).

mod common;

use common::{TestEnv, uint};
use serde_json::Value;

const TRANSPORTS: [&str; 3] = ["cuframes", "pipe", "shm-copy"];

/// `bench <args> --json`, which must succeed: its JSON array.
fn bench(env: &TestEnv, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["bench", "--memory", "host", "--json"];
    all.extend_from_slice(args);
    let out = env.run(&all);
    out.assert_success();
    out.json()
        .as_array()
        .unwrap_or_else(|| panic!("bench --json is not an array: {out}"))
        .clone()
}

fn num(v: &Value, name: &str) -> f64 {
    v[name]
        .as_f64()
        .unwrap_or_else(|| panic!("field {name} is not a number in {v}"))
}

#[test]
fn every_transport_delivers_every_frame_verified() {
    let env = TestEnv::new();
    let plot = env.dir().join("latency.svg");
    let plot_arg = plot.display().to_string();
    let reports = bench(
        &env,
        &[
            "--size",
            "320x240",
            "--frames",
            "200",
            "--subscribers",
            "2",
            "--plot",
            &plot_arg,
        ],
    );
    let names: Vec<&str> = reports.iter().filter_map(|r| r["transport"].as_str()).collect();
    assert_eq!(names, TRANSPORTS, "{reports:?}");
    for r in &reports {
        assert_eq!(uint(r, "mismatched"), 0, "{r}");
        assert_eq!(uint(r, "received"), 400, "2 subscribers x 200 frames: {r}");
        assert_eq!(uint(r, "verified"), 400, "{r}");
        assert_eq!(uint(r, "dropped"), 0, "strict-wait and pipes lose nothing: {r}");
        assert!(r["error"].is_null(), "{r}");
        assert!(num(r, "fps") > 0.0, "{r}");
        assert!(
            num(r, "p50_us") > 0.0 && num(r, "p50_us") <= num(r, "p99_us"),
            "{r}"
        );
        assert!(num(r, "p99_us") <= num(r, "max_us"), "{r}");
        assert!(num(r, "cpu_us_per_frame") > 0.0, "{r}");
        assert!(num(r, "publisher_cpu_us_per_frame") > 0.0, "{r}");
        assert!(num(r, "subscriber_cpu_us_per_frame") > 0.0, "{r}");
        assert_eq!(uint(r, "subscribers"), 2, "{r}");
        assert_eq!(uint(r, "width"), 320, "{r}");
        assert_eq!(r["memory"], "host", "{r}");
        assert_eq!(r["per_subscriber"].as_array().map(Vec::len), Some(2), "{r}");
        // 200 frames: whole-frame checks of seq 100 and 200, rows of the rest.
        assert_eq!(uint(r, "whole_frames_checked"), 4, "{r}");
        assert!(
            r["verification"]
                .as_str()
                .is_some_and(|v| v.contains("every 100th frame")),
            "{r}"
        );
    }
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
    assert_eq!(svg.matches("<path").count(), 3, "one curve per transport: {svg}");
    for t in TRANSPORTS {
        assert!(
            svg.contains(&format!("data-transport=\"{t}\"")),
            "curve of {t}: {svg}"
        );
    }
    assert!(svg.contains("µs"), "labelled axis: {svg}");
}

#[test]
fn drop_oldest_accounts_for_every_frame() {
    let env = TestEnv::new();
    let reports = bench(
        &env,
        &[
            "--size",
            "160x120",
            "--format",
            "yuv420p",
            "--frames",
            "300",
            "--ring",
            "2",
            "--policy",
            "drop-oldest",
            "--transports",
            "shm-copy,cuframes",
            "--verify",
            "full",
        ],
    );
    let names: Vec<&str> = reports.iter().filter_map(|r| r["transport"].as_str()).collect();
    assert_eq!(names, ["shm-copy", "cuframes"]);
    for r in &reports {
        assert_eq!(r["policy"], "drop_oldest", "FFmpeg's spelling: {r}");
        assert_eq!(uint(r, "mismatched"), 0, "{r}");
        assert_eq!(
            uint(r, "received") + uint(r, "dropped"),
            300,
            "every frame is received or counted as dropped: {r}"
        );
        assert_eq!(uint(r, "verified"), uint(r, "received"), "{r}");
        assert!(num(r, "fps") > 0.0, "{r}");
    }
}

#[test]
fn paced_pipe_alone() {
    let env = TestEnv::new();
    let reports = bench(
        &env,
        &[
            "--size",
            "64x48",
            "--format",
            "p010",
            "--frames",
            "50",
            "--fps",
            "500",
            "--transports",
            "pipe",
        ],
    );
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r["transport"], "pipe");
    assert_eq!(uint(r, "verified"), 50, "{r}");
    // 50 frames at 500 fps take about 0.1 s: the rate is the pace, not more.
    assert!(num(r, "fps") < 600.0, "{r}");
}

#[test]
fn bad_arguments_name_the_option() {
    let env = TestEnv::new();
    for (args, phrase) in [
        (&["--subscribers", "0"][..], "--subscribers"),
        (&["--subscribers", "40"], "--subscribers"),
        (&["--size", "12"], "--size"),
        (&["--size", "0x10"], "--size"),
        (&["--transports", "pipe,pipe"], "--transports"),
        (&["--ring", "17"], "--ring"),
        (&["--frames", "0"], "--frames"),
        (&["--fps=-1"], "--fps"),
        (&["--timeout", "0ms"], "--timeout"),
        (&["--timeout", "999us"], "--timeout"),
        (&["--plot", "/nonexistent-dir/x.svg"], "--plot"),
    ] {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        let out = env.run(&all);
        out.assert_error(&[phrase]);
        assert!(out.stdout.is_empty(), "no report on a bad argument: {out}");
    }
    // Malformed for clap itself: exit 2, the option named, the choices listed.
    for (args, phrases) in [
        (&["--subscribers", "many"][..], &["--subscribers"][..]),
        (&["--format", "rgb24"], &["--format", "nv12", "rgb0"]),
        (
            &["--policy", "never"],
            &["--policy", "[possible values: drop_oldest, strict_wait]"],
        ),
        (
            &["--transports", "pipe,carrier-pigeon"],
            &["--transports", "cuframes, pipe, shm-copy"],
        ),
        (&["--transports", ","], &["--transports"]),
        (
            &["--memory", "disk"],
            &["--memory", "[possible values: auto, host, cuda]"],
        ),
        (
            &["--verify", "most"],
            &["--verify", "[possible values: sample, full, none]"],
        ),
        (
            &["--cuda-share", "dmabuf"],
            &["--cuda-share", "[possible values: auto, fd, ipc]"],
        ),
        (&["--timeout", "10 s"], &["--timeout", "not a duration"]),
        (&["--timeout=-1"], &["--timeout", "negative"]),
    ] {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        env.run(&all).assert_usage_error(phrases);
    }
}

/// Without a GPU (hidden with CUDA_VISIBLE_DEVICES where there is one).
#[test]
fn cuda_without_a_gpu_is_a_clear_error() {
    let env = TestEnv::new();
    let out = env.run_without_gpu(&["bench", "--memory", "cuda", "--size", "64x48", "--frames", "10"]);
    out.assert_error(&["--memory cuda", "CUDA is not available"]);
}
