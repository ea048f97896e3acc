//! At start-up a bad config stops the program with the message (exit status 1, no panic):
//! the whole path from the command line, for each kind of mistake. No GPU needed: the config
//! is checked before the device is opened.

mod common;

use std::process::Command;

/// Runs `upscale-demo --config <file with text> headless ...`; returns stderr and the file.
fn run_with(name: &str, text: &str, extra: &[&str]) -> (String, std::path::PathBuf) {
    let dir = common::out_dir(&format!("bad_config_{name}"));
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, text).unwrap();
    let out = Command::new(common::demo_exe())
        .arg("--config")
        .arg(&config)
        .args(["headless", "--frames", "1", "--out"])
        .arg(&dir)
        .args(extra)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
    assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    assert!(
        !dir.join("summary.json").exists(),
        "{name}: nothing rendered"
    );
    (stderr, config)
}

#[test]
fn each_kind_of_bad_config_stops_with_its_message() {
    let cases = [
        // toml's own layout: the line, then the caret under column 8 on a line of its own.
        (
            "malformed",
            "[window\nwidth = 3",
            "line 1, column 8\n  |\n1 | [window\n  |        ^\n",
        ),
        (
            "unknown_key",
            "[render]\nouput_width = 640",
            "unknown key `render.ouput_width`: did you mean `render.output_width`?",
        ),
        (
            "wrong_type",
            "[window]\nvsync = \"yes\"",
            "expected a boolean",
        ),
        (
            "zero_size",
            "[render]\noutput_width = 0",
            "render.output_width = 0: must be 1..=16384 pixels",
        ),
        (
            "odd_size",
            "[render]\noutput_width = 641\noutput_height = 360",
            "render.scale = 2: must divide the output size 641x360 exactly",
        ),
        (
            "too_large",
            "[render]\noutput_width = 20000",
            "render.output_width = 20000: must be 1..=16384 pixels",
        ),
        (
            "bad_msaa",
            "[render]\nmsaa = 3",
            "render.msaa = 3: must be one of 1, 2, 4, 8 (samples per pixel; 1 = no MSAA)",
        ),
        (
            "bad_provider",
            "[onnxruntime]\nexecution_provider = \"tpu\"",
            "onnxruntime.execution_provider = \"tpu\": one of: cpu, cuda",
        ),
        (
            "shared_domain",
            "[upscale]\nshared_domain = \"gpu\"",
            "upscale.shared_domain = \"gpu\": one of: auto, host, cuda",
        ),
        (
            "present_mode",
            "[window]\npresent_mode = \"vsync\"",
            "window.present_mode = \"vsync\": one of: fifo, mailbox, immediate",
        ),
        (
            "fps_cap",
            "[window]\nfps_cap = -30",
            "window.fps_cap = -30: must be 0 (no cap) or frames per second up to 1000",
        ),
    ];
    for (name, text, expected) in cases {
        let (stderr, file) = run_with(name, text, &[]);
        let prefix = format!("error: {}: ", file.display());
        assert!(
            stderr.starts_with(&prefix),
            "{name}: names the file: {stderr}"
        );
        assert!(
            stderr.contains(expected),
            "{name}: {expected:?} missing from: {stderr}"
        );
        // An unknown key is named once, with the suggestion, not also in serde's list.
        assert!(!stderr.contains("unknown field"), "{name}: {stderr}");
    }
}

#[test]
fn a_bad_output_size_on_the_command_line_is_checked_like_the_file() {
    let (stderr, _) = run_with("cli_size", "", &["--output-size", "127x72"]);
    assert!(
        stderr.starts_with(
            "error: --output-size: render.scale = 2: must divide the output size 127x72"
        ),
        "{stderr}"
    );
}

#[test]
fn a_missing_config_file_says_how_to_pick_another_once() {
    let out = Command::new(common::demo_exe())
        .args(["--config", "/nonexistent/upscale.toml", "headless"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "error: /nonexistent/upscale.toml: cannot read the config file: \
         No such file or directory (os error 2). Pass another with --config PATH"
    );
}

/// Command-line numbers that would divide by zero or render nothing are refused up front.
#[test]
fn zero_counts_on_the_command_line_are_refused() {
    for (args, expected) in [
        (
            &["--switch-every", "0"][..],
            "error: --switch-every must be at least 1",
        ),
        (&["--frames", "0"][..], "error: --frames must be at least 1"),
        (
            &["--soak", "--model-every", "0"][..],
            "error: --switch-every and --model-every must be at least 1",
        ),
        (
            &["--output-size", "0x72"][..],
            "error: --output-size: render.output_width = 0: must be 1..=16384 pixels",
        ),
    ] {
        let out = Command::new(common::demo_exe())
            .arg("headless")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.trim_end().ends_with(expected) && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}
