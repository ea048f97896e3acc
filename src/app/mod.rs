//! The application edge: command line, config, the windowed game loop and the headless runner.

pub mod bench;
pub mod capture;
pub mod config;
pub mod dataset;
pub mod frames;
pub mod headless;
pub mod models;
pub mod pacing;
pub mod paths;
pub mod quality;
pub mod run_model;
pub mod session;
pub mod soak;
pub mod summary;
pub mod window;

/// True when a window system is reachable (X11 or Wayland).
pub fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}
