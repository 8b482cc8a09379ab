//! `cuframes --help` and every command's help: every choice is listed, with
//! its default; every option has a help line; renamed options stay hidden;
//! completions and manual pages come from the same definition.

mod common;

use common::TestEnv;

/// An option with choices: its name, every value, the default.
type Choice = (&'static str, &'static [&'static str], &'static str);

/// Every command `--help` lists, and the choices each must list.
const CHOICES: &[(&str, &[Choice])] = &[
    (
        "publish",
        &[
            ("--memory", &["auto", "host", "cuda"], "auto"),
            (
                "--format",
                &[
                    "nv12",
                    "yuv420p",
                    "p010",
                    "bgra",
                    "p016",
                    "yuv444p",
                    "yuv444p16",
                    "rgba",
                    "bgr0",
                    "rgb0",
                    "p012",
                    "nv16",
                    "p210",
                    "p212",
                    "p216",
                    "yuv422p",
                    "yuv420p10",
                    "yuv422p10",
                    "yuv444p10",
                    "yuv444p10msb",
                    "yuv444p12msb",
                    "yuva420p",
                ],
                "nv12",
            ),
            ("--policy", &["drop_oldest", "strict_wait"], "drop_oldest"),
            ("--v1-peers", &["refuse", "same_user", "allow"], "same_user"),
            ("--cuda-share", &["auto", "fd", "ipc"], "auto"),
        ],
    ),
    (
        "subscribe",
        &[
            ("--mode", &["sequential", "latest"], "sequential"),
            ("--copy", &["auto", "always", "never"], "auto"),
        ],
    ),
    ("ls", &[]),
    ("inspect", &[]),
    ("cleanup", &[]),
    (
        "bench",
        &[
            ("--memory", &["auto", "host", "cuda"], "host"),
            ("--format", &["nv12", "rgb0"], "nv12"),
            ("--policy", &["drop_oldest", "strict_wait"], "strict_wait"),
            (
                "--transports",
                &["cuframes", "pipe", "shm-copy"],
                "cuframes,pipe,shm-copy",
            ),
            ("--verify", &["sample", "full", "none"], "sample"),
            ("--cuda-share", &["auto", "fd", "ipc"], "auto"),
        ],
    ),
    ("top", &[]),
    ("exporter", &[]),
    ("health", &[]),
];

/// Defaults shared with the FFmpeg components, as help shows them.
const DEFAULTS: &[(&str, &str, &str)] = &[
    ("publish", "--ring", "16"),
    ("publish", "--ack-timeout", "1s"),
    ("publish", "--startup-timeout", "10s"),
    ("publish", "--wait-timeout", "30s"),
    ("subscribe", "--timeout", "5s"),
    ("subscribe", "--read-ahead", "32"),
    ("subscribe", "--wait-timeout", "30s"),
    ("top", "--interval", "1s"),
    ("exporter", "--listen", "127.0.0.1:9477"),
    ("exporter", "--interval", "15s"),
    ("health", "--max-age", "2s"),
];

/// The section of `help` about one option: from its line to the next option's.
fn option_section<'a>(help: &'a str, option: &str) -> &'a str {
    let start = help
        .lines()
        .position(|l| l.trim_start().starts_with(&format!("{option} ")) || l.trim() == option)
        .unwrap_or_else(|| panic!("{option} is not in:\n{help}"));
    let lines: Vec<&str> = help.lines().collect();
    let end = (start + 1..lines.len())
        .find(|&i| {
            let t = lines[i].trim_start();
            t.starts_with("--") || (t.starts_with('-') && t.len() > 1 && !t.starts_with("- "))
        })
        .unwrap_or(lines.len());
    let from = help.find(lines[start]).unwrap();
    let to = if end < lines.len() {
        help[from..].find(lines[end]).map_or(help.len(), |n| from + n)
    } else {
        help.len()
    };
    &help[from..to]
}

#[test]
fn top_level_help_lists_every_command() {
    let env = TestEnv::new();
    let out = env.run(&["--help"]);
    out.assert_success();
    for (command, _) in CHOICES {
        assert!(
            out.stdout
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{command} "))),
            "{command} missing: {out}"
        );
    }
    for hidden in ["__bench-worker", "completions", "manpage"] {
        assert!(!out.stdout.contains(hidden), "{hidden} is internal: {out}");
    }
}

#[test]
fn every_command_lists_its_choices_and_defaults() {
    let env = TestEnv::new();
    for (command, choices) in CHOICES {
        let out = env.run(&[command, "--help"]);
        out.assert_success();
        let help = &out.stdout;
        for (option, values, default) in *choices {
            let section = option_section(help, option);
            assert!(
                section.contains("Possible values:"),
                "{command} {option} lists no choices:\n{section}"
            );
            for value in *values {
                assert!(
                    section.contains(&format!("- {value}:")),
                    "{command} {option} lacks {value}:\n{section}"
                );
            }
            assert!(
                section.contains(&format!("[default: {default}]")),
                "{command} {option}:\n{section}"
            );
        }
        // The short help lists the choices too.
        let short = env.run(&[command, "-h"]);
        short.assert_success();
        for (option, values, _) in *choices {
            let line = short
                .stdout
                .lines()
                .find(|l| l.trim_start().starts_with(option))
                .unwrap();
            assert!(line.contains(values[0]), "{command} -h: {option}: {line}");
        }
        // Every option has a help line, and no renamed (-ms) option shows.
        for line in help.lines().filter(|l| l.trim_start().starts_with("--")) {
            let option = line.split_whitespace().next().unwrap();
            let section = option_section(help, option);
            assert!(
                section.lines().count() > 1 || line.trim().len() > option.len() + 12,
                "{command} {option} has no help:\n{section}"
            );
            assert!(
                !option.ends_with("-ms"),
                "{command}: {option} should be a duration"
            );
        }
    }
    for (command, option, default) in DEFAULTS {
        let out = env.run(&[command, "--help"]);
        let section = option_section(&out.stdout, option);
        assert!(
            section.contains(&format!("[default: {default}]")),
            "{command} {option}:\n{section}"
        );
    }
}

/// The publisher's defaults as `--help` says them are the library's (the C
/// API's are checked against it when it builds, Python's against the C API,
/// the FFmpeg muxer's against this command in tests/ffmpeg/run.sh).
#[test]
fn the_publishers_defaults_are_the_librarys() {
    let env = TestEnv::new();
    let help = env.run(&["publish", "--help"]).stdout;
    let seconds = |d: std::time::Duration| format!("{}s", d.as_secs());
    for (option, default) in [
        ("--ring", cuframes::defaults::RING_SIZE.to_string()),
        ("--ack-timeout", seconds(cuframes::defaults::ACK_TIMEOUT)),
        ("--startup-timeout", seconds(cuframes::defaults::STARTUP_TIMEOUT)),
        (
            "--handshake-timeout",
            seconds(cuframes::defaults::HANDSHAKE_TIMEOUT),
        ),
    ] {
        let section = option_section(&help, option);
        assert!(
            section.contains(&format!("[default: {default}]")),
            "publish {option}: the library's default is {default}:\n{section}"
        );
    }
}

/// The subscriber's defaults as `subscribe --help` says them are the
/// library's (the C API's are checked against it when it builds, Python's
/// against the C API, the FFmpeg input device's and source filter's against
/// this command in tests/ffmpeg/run.sh, cuframessrc's in
/// tests/gstreamer/run.sh).
#[test]
fn the_subscribers_defaults_are_the_librarys() {
    let env = TestEnv::new();
    let help = env.run(&["subscribe", "--help"]).stdout;
    let seconds = |d: std::time::Duration| format!("{}s", d.as_secs());
    let copy = match cuframes::defaults::COPY {
        cuframes::CopyMode::Auto => "auto",
        cuframes::CopyMode::Always => "always",
        cuframes::CopyMode::Never => "never",
    };
    for (option, default) in [
        ("--copy", copy.to_owned()),
        ("--read-ahead", cuframes::defaults::READ_AHEAD.to_string()),
        ("--wait-timeout", seconds(cuframes::defaults::WAIT_FOR_PUBLISHER)),
        ("--timeout", seconds(cuframes::defaults::FRAME_TIMEOUT)),
    ] {
        let section = option_section(&help, option);
        assert!(
            section.contains(&format!("[default: {default}]")),
            "subscribe {option}: the library's default is {default}:\n{section}"
        );
    }
}

#[test]
fn completions_and_manual_pages_come_from_the_same_definition() {
    let env = TestEnv::new();
    let bash = env.run(&["completions", "bash"]);
    bash.assert_success();
    for word in [
        "_cuframes()",
        "publish",
        "subscribe",
        "--policy",
        "drop_oldest strict_wait",
        "--wait-timeout",
    ] {
        assert!(bash.stdout.contains(word), "bash completion lacks {word}");
    }
    let zsh = env.run(&["completions", "zsh"]);
    zsh.assert_success();
    for word in ["#compdef cuframes", "drop_oldest", "strict_wait", "--cuda-share"] {
        assert!(zsh.stdout.contains(word), "zsh completion lacks {word}");
    }
    for (shell, text) in [("bash", &bash.stdout), ("zsh", &zsh.stdout)] {
        for hidden in [
            "__bench-worker",
            "manpage",
            "completions",
            "timeout-ms",
            "wait-ms",
        ] {
            assert!(
                !text.contains(hidden),
                "{shell} completion offers hidden {hidden}"
            );
        }
    }
    env.run(&["completions", "tcsh"])
        .assert_usage_error(&["[possible values: bash, elvish, fish, powershell, zsh]"]);
    env.run(&["completions"]).assert_usage_error(&["<SHELL>"]);

    let page = env.run(&["manpage"]);
    page.assert_success();
    assert!(
        page.stdout.starts_with(".ie \\n(.g .ds Aq") || page.stdout.contains(".TH cuframes 1"),
        "{page}"
    );
    assert!(
        page.stdout.contains("cuframes\\-publish"),
        "the page lists the commands"
    );
    let dir = tempfile::tempdir().unwrap();
    env.run(&["manpage", "--dir", dir.path().to_str().unwrap()])
        .assert_success();
    for name in [
        "cuframes.1",
        "cuframes-publish.1",
        "cuframes-subscribe.1",
        "cuframes-bench.1",
        "cuframes-top.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(".TH"), "{name}");
    }
    let pages: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        pages.len(),
        10,
        "one page per visible command, none for hidden ones: {pages:?}"
    );
    let publish = std::fs::read_to_string(dir.path().join("cuframes-publish.1")).unwrap();
    assert!(
        !publish.contains("timeout\\-ms"),
        "hidden options stay out of the page"
    );
    assert!(publish.contains("drop_oldest"), "the page lists the choices");
    env.run(&["manpage", "--dir", "/nonexistent/cuframes-man"])
        .assert_error(&["--dir", "not a directory"]);
}
