//! Finding the project's files (assets, models, the ONNX Runtime library) whether the program
//! runs from the repository, from `target/`, or from a copy next to its files.

use std::path::{Path, PathBuf};

/// The folder holding `assets/`: the working directory, an ancestor of the executable, or the
/// source tree this binary was built from.
pub fn root() -> PathBuf {
    let has_assets = |p: &Path| p.join("assets").is_dir();
    if let Ok(cwd) = std::env::current_dir() {
        if has_assets(&cwd) {
            return cwd;
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(found) = exe.ancestors().skip(1).take(4).find(|p| has_assets(p)) {
            return found.to_path_buf();
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path from the config or the command line: absolute as given; relative to the working
/// directory when it exists there; else relative to [`root`].
pub fn resolve(path: &Path) -> PathBuf {
    if path.is_absolute() || path.exists() {
        return path.to_path_buf();
    }
    root().join(path)
}
