//! The windowed game under Xvfb: it opens, toggles the overlay and the pattern (bilinear ->
//! cpu-roundtrip), takes a screenshot, survives 20 pattern toggles in one second, a walk through
//! the model list with M (bad models among them: refused, the game goes on), a resize storm and
//! an unmap/map (what a window manager does on minimise), closes on Escape, and reports 0
//! validation errors. A second game has its window destroyed from outside and must end cleanly.
//!
//! Needs Xvfb, xdotool and imagemagick (`make setup` installs them); fails loudly without them.

mod common;

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

use upscale_demo::gpu::{Gpu, Validation};

const PATTERN_PRESSES: u64 = 21;
const MODEL_PRESSES: u64 = 6;

struct Xvfb(Child, String);

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Held while a test picks a display number and waits for its server, so that tests running in
/// parallel never pick the same one.
static XVFB_START: Mutex<()> = Mutex::new(());

fn start_xvfb() -> Xvfb {
    let _picking = XVFB_START.lock().unwrap_or_else(|e| e.into_inner());
    let n = (90..200)
        .find(|n| {
            !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
                && !Path::new(&format!("/tmp/.X{n}-lock")).exists()
        })
        .expect("no free X display number");
    let display = format!(":{n}");
    let child = Command::new("Xvfb")
        .args([&display, "-screen", "0", "1024x768x24", "-nolisten", "tcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start Xvfb: install it with `make setup` (package xvfb)");
    let socket = format!("/tmp/.X11-unix/X{n}");
    let start = Instant::now();
    while !Path::new(&socket).exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "Xvfb did not start on {display}"
        );
        sleep(Duration::from_millis(100));
    }
    Xvfb(child, display)
}

fn xdotool(display: &str, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg("60")
        .arg("xdotool")
        .args(args)
        .env("DISPLAY", display)
        .output()
        .expect("cannot run xdotool: install it with `make setup`");
    assert!(
        out.status.success(),
        "xdotool {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The game in a 640x360 window on `display` with a small render size, writing summary.json
/// and its output (game.log) into `dir`; returns once its window is up and has run for 3 s.
fn start_game(dir: &Path, display: &str) -> (Child, String) {
    let config = dir.join("smoke.toml");
    std::fs::write(
        &config,
        "[window]\nwidth = 640\nheight = 360\nvsync = false\n[render]\noutput_width = 320\noutput_height = 180\n",
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("game.log")).unwrap();
    let game = Command::new(common::demo_exe())
        .arg("--config")
        .arg(&config)
        .arg("--summary")
        .arg(dir.join("summary.json"))
        .args(["--exit-after-frames", "100000"])
        .current_dir(dir)
        .env("DISPLAY", display)
        .env_remove("WAYLAND_DISPLAY")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let window = xdotool(display, &["search", "--sync", "--name", "upscale-demo"]);
    let window = window.lines().next().unwrap().to_string();
    sleep(Duration::from_secs(3));
    (game, window)
}

/// Waits up to 60 s for the game to exit (`why`: what should have ended it).
fn wait_exit(game: &mut Child, why: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = game.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = game.kill();
            panic!("the game did not exit {why} within 60 s");
        }
        sleep(Duration::from_millis(100));
    }
}

/// A window destroyed from outside (as `xkill` or a crashing window manager may do) ends the
/// game cleanly: exit status 0, the summary written, 0 validation errors. It used to panic in
/// winit's size query on the dead window.
#[test]
fn a_window_destroyed_from_outside_ends_the_game_cleanly() {
    let xvfb = start_xvfb();
    let display = xvfb.1.clone();
    let dir = common::out_dir("window_destroyed");
    let (mut game, window) = start_game(&dir, &display);
    xdotool(&display, &["windowclose", &window]);
    let status = wait_exit(&mut game, "after its window was destroyed");
    let log = std::fs::read_to_string(dir.join("game.log")).unwrap();
    assert!(status.success(), "the game exited with {status}:\n{log}");
    assert!(
        log.contains("destroyed"),
        "the log says why the game ended:\n{log}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["validation_errors"], 0, "{log}");
    assert_eq!(json["validation_enabled"], common::expect_validation());
    assert_eq!(json["teardown"]["leaked_allocations"], 0, "{log}");
    assert_eq!(json["teardown"]["validation_errors"], 0, "{log}");
}

/// A start-up the device refuses (`render.msaa` it lacks: 8 on lavapipe) ends the window run
/// with that message alone: the window that went with the failed start-up is not reported as
/// "destroyed from outside".
#[test]
fn a_refused_start_up_in_a_window_says_only_why() {
    let (gpu, _) = Gpu::new(Validation::from_env(), &[], "", None).unwrap();
    let supported = gpu.info.msaa_sample_counts.clone();
    drop(gpu);
    let Some(missing) = [8, 2].into_iter().find(|n| !supported.contains(n)) else {
        eprintln!("the device supports msaa 2 and 8: nothing to refuse");
        return;
    };
    let xvfb = start_xvfb();
    let dir = common::out_dir("window_msaa_refused");
    let config = dir.join("msaa.toml");
    let text = format!("[window]\nwidth = 320\nheight = 180\n[render]\nmsaa = {missing}\n");
    std::fs::write(&config, text).unwrap();
    let log = std::fs::File::create(dir.join("game.log")).unwrap();
    let mut game = Command::new(common::demo_exe())
        .arg("--config")
        .arg(&config)
        .args(["--exit-after-frames", "1"])
        .current_dir(&dir)
        .env("DISPLAY", &xvfb.1)
        .env_remove("WAYLAND_DISPLAY")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let status = wait_exit(&mut game, "after the refused start-up");
    let log = std::fs::read_to_string(dir.join("game.log")).unwrap();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!(": render.msaa = {missing}: ")),
        "the real message: {log}"
    );
    assert!(!log.contains("destroyed"), "only the real message: {log}");
    // The failed start-up released its swapchain and surface.
    assert!(!log.contains("Validation Error"), "{log}");
}

#[test]
fn windowed_game_toggles_resizes_and_stays_validation_clean() {
    let xvfb = start_xvfb();
    let display = xvfb.1.clone();
    let dir = common::out_dir("window_smoke");
    let summary = dir.join("summary.json");
    let (mut game, window) = start_game(&dir, &display);
    xdotool(&display, &["windowfocus", "--sync", &window]);
    for key in ["F1", "F1", "p", "F12"] {
        xdotool(&display, &["key", key]);
        sleep(Duration::from_millis(700));
    }
    // 20 pattern switches as fast as a hand can: several arrive between two frames. 1 + 20 P
    // presses over 5 patterns end on cpu-roundtrip, where the model switches rebuild the upscaler.
    let storm: Vec<&str> = ["--delay", "40"].into_iter().chain(["p"; 20]).collect();
    xdotool(&display, &[&["key"][..], &storm].concat());
    sleep(Duration::from_millis(1500));
    // Compare view on (right side: bilinear, the first that can sit next to cpu-roundtrip),
    // divider dragged from the middle to a quarter of the 640-pixel picture; the model switches
    // and resizes below then run with it on.
    xdotool(&display, &["key", "v"]);
    sleep(Duration::from_millis(800));
    xdotool(&display, &["mousemove", "--window", &window, "480", "200"]);
    sleep(Duration::from_millis(500));
    xdotool(&display, &["mousedown", "1"]);
    sleep(Duration::from_millis(300));
    xdotool(&display, &["mousemove", "--window", &window, "160", "200"]);
    sleep(Duration::from_millis(500));
    xdotool(&display, &["mouseup", "1"]);
    sleep(Duration::from_millis(500));
    // From over the picture, the pointer jumps onto the overlay panel's title bar and clicks
    // there at once, before a frame can show egui where it went: egui's press, not the
    // picture's (it used to move the divider to 60/640). Then F12 saves the compare view.
    xdotool(&display, &["mousemove", "--window", &window, "480", "200"]);
    sleep(Duration::from_millis(500));
    if !panel_title_at(&display, &dir, (60, 20)) {
        // An F1 above went astray (the window may not have had the focus yet).
        xdotool(&display, &["key", "F1"]);
        sleep(Duration::from_millis(700));
    }
    assert!(
        panel_title_at(&display, &dir, (60, 20)),
        "the overlay panel is not where the click goes"
    );
    xdotool(
        &display,
        &["mousemove", "--window", &window, "60", "20", "click", "1"],
    );
    sleep(Duration::from_millis(500));
    xdotool(&display, &["key", "F12"]);
    sleep(Duration::from_millis(700));
    // M walks models/*.onnx then models/test/*.onnx from quality_x2: temporal_x2 (the
    // temporal model) is taken, custom_op_x2 and dynamic_channels are refused on
    // cpu-roundtrip, espcn_x2_160x90 (this render size) and no_scale_meta are taken,
    // one_channel is refused.
    for _ in 0..MODEL_PRESSES {
        xdotool(&display, &["key", "m"]);
        sleep(Duration::from_millis(500));
    }
    for (w, h) in [
        ("800", "500"),
        ("300", "600"),
        ("1000", "700"),
        ("200", "120"),
        ("640", "360"),
    ] {
        xdotool(&display, &["windowsize", &window, w, h]);
        sleep(Duration::from_millis(400));
    }
    xdotool(&display, &["windowunmap", &window]);
    sleep(Duration::from_secs(1));
    xdotool(&display, &["windowmap", "--sync", &window]);
    sleep(Duration::from_secs(2));

    let screen = dir.join("screen.png");
    let status = Command::new("import")
        .args(["-window", "root"])
        .arg(&screen)
        .env("DISPLAY", &display)
        .status()
        .expect("cannot run `import`: install imagemagick with `make setup`");
    assert!(status.success());
    xdotool(&display, &["windowfocus", "--sync", &window]);
    xdotool(&display, &["key", "Escape"]);

    let status = wait_exit(&mut game, "on Escape");
    assert!(status.success(), "the game exited with {status}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(
        json["validation_errors"], 0,
        "validation errors in the windowed run"
    );
    assert_eq!(json["validation_enabled"], common::expect_validation());
    // summary.json is rewritten after the device is destroyed.
    assert_eq!(json["teardown"]["leaked_allocations"], 0);
    assert_eq!(json["teardown"]["validation_errors"], 0);
    assert!(
        json["frames"].as_u64().unwrap() > 20,
        "too few frames: {}",
        json["frames"]
    );
    let switches = &json["switches"];
    let count = |key: &str| switches[key].as_u64().unwrap();
    assert_eq!(
        count("patterns") + count("patterns_refused"),
        PATTERN_PRESSES,
        "every P press was handled: {switches}"
    );
    assert_eq!(count("patterns_refused"), 0, "{switches}");
    assert_eq!(json["pattern"], "cpu-roundtrip");
    assert_eq!(
        (count("models"), count("models_refused")),
        (3, 3),
        "M presses: {switches}"
    );
    assert_eq!(json["model"], "models/test/no_scale_meta.onnx");
    let notice = json["notice"].as_str().unwrap_or_default();
    assert!(
        notice.starts_with("models/test/one_channel.onnx: ") && notice.contains("has 1 channel(s)"),
        "the last refusal is on screen: {notice}"
    );
    let compare = &json["compare"];
    assert_eq!(
        compare["right"], "bilinear",
        "V turned the compare view on: {compare}"
    );
    let divider = compare["divider"].as_f64().unwrap();
    assert!(
        (divider - 0.25).abs() < 0.02,
        "dragged divider at {divider} (a press on the overlay moved it?)"
    );
    assert!(
        compare["psnr_y"].as_f64().is_some_and(|p| p > 10.0),
        "live PSNR: {compare}"
    );
    let mut shots: Vec<_> = std::fs::read_dir(dir.join("screenshots"))
        .expect("F12 wrote no screenshot")
        .map(|e| e.unwrap().path())
        .collect();
    shots.sort();
    assert_eq!(shots.len(), 2, "each F12 saves one screenshot: {shots:?}");
    let shot = image::open(&shots[0]).unwrap().to_rgb8();
    assert!(
        common::luma_std(&shot) > 15.0,
        "the F12 screenshot looks blank"
    );
    // The compare view's shot is the split as seen: the divider (a white line at x = 160 of
    // the 640-pixel picture) is in it, and the game said which picture it saved.
    let split = image::open(&shots[1]).unwrap().to_rgb8();
    let line = (150..170)
        .map(|x| column_luma(&split, x))
        .fold(0.0, f64::max);
    assert!(
        line > 200.0,
        "no divider line near x = 160 in the compare screenshot (brightest column {line:.0})"
    );
    let log = std::fs::read_to_string(dir.join("game.log")).unwrap();
    assert!(
        log.contains("screenshot saved (cpu-roundtrip output, without the overlay)")
            || log.contains("screenshot saved (bilinear output, without the overlay)"),
        "{log}"
    );
    assert!(
        log.contains("screenshot saved (compare view as seen: cpu-roundtrip | bilinear, with the divider and labels)"),
        "{log}"
    );
    let screen = image::open(&screen).unwrap().to_rgb8();
    assert!(
        common::luma_std(&screen) > 15.0,
        "the Xvfb screenshot looks blank"
    );
}

/// Mean luma (0..255) of column `x` between 1/6 and 5/6 of the height (clear of the HUD and of
/// the side labels at the bottom).
fn column_luma(img: &image::RgbImage, x: u32) -> f64 {
    let rows = img.height() / 6..img.height() * 5 / 6;
    let n = rows.len() as f64;
    rows.map(|y| {
        let [r, g, b] = img.get_pixel(x, y).0;
        0.299 * r as f64 + 0.587 * g as f64 + 0.114 * b as f64
    })
    .sum::<f64>()
        / n
}

/// Whether the overlay panel's title bar (egui's dark grey, not the sky behind it) is at `at`
/// on the screen (the window sits at the screen's top-left corner).
fn panel_title_at(display: &str, dir: &Path, at: (u32, u32)) -> bool {
    let path = dir.join("panel.png");
    let status = Command::new("import")
        .args(["-window", "root"])
        .arg(&path)
        .env("DISPLAY", display)
        .status()
        .expect("cannot run `import`: install imagemagick with `make setup`");
    assert!(status.success());
    let [r, g, b] = image::open(&path)
        .unwrap()
        .to_rgb8()
        .get_pixel(at.0, at.1)
        .0;
    r.max(g).max(b) < 70 && r.max(g).max(b) - r.min(g).min(b) < 12
}
