//! The models the overlay's picker (and the M key) offers: `models/*.onnx`, then the test
//! fixtures `models/test/*.onnx` (some of them are deliberately bad: picking one shows why it
//! cannot run while the previous model keeps running). Listed once at start-up, never per frame.

use std::path::{Path, PathBuf};

/// `<root>/models/*.onnx` then `<root>/models/test/*.onnx`, each sorted by name, with `current`
/// first when it is none of them (a model from elsewhere named in the config).
pub fn list(root: &Path, current: &Path) -> Vec<PathBuf> {
    let models = root.join("models");
    let mut all = onnx_files(&models);
    all.extend(onnx_files(&models.join("test")));
    if !all.iter().any(|m| same_file(m, current)) {
        all.insert(0, current.to_path_buf());
    }
    all
}

fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    files.sort();
    files
}

/// Whether two paths name the same file (also when one is relative or goes through a link).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// A short name for people: relative to the project root when inside it
/// (`models/test/tiny_x2.onnx`), else the path as given.
pub fn label(root: &Path, path: &Path) -> String {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    match canonical(path).strip_prefix(canonical(root)) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_models_then_fixtures_and_keeps_a_foreign_current_model() {
        let root = std::env::temp_dir().join(format!("upscale-models-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("models/test")).unwrap();
        for f in [
            "models/b.onnx",
            "models/a.onnx",
            "models/README.md",
            "models/test/t.onnx",
        ] {
            std::fs::write(root.join(f), b"x").unwrap();
        }
        let names = |v: Vec<PathBuf>| v.iter().map(|p| label(&root, p)).collect::<Vec<_>>();
        let inside = list(&root, &root.join("models/b.onnx"));
        assert_eq!(
            names(inside),
            ["models/a.onnx", "models/b.onnx", "models/test/t.onnx"]
        );
        let foreign = Path::new("/elsewhere/m.onnx");
        let with_foreign = list(&root, foreign);
        assert_eq!(with_foreign[0], foreign);
        assert_eq!(with_foreign.len(), 4);
        assert_eq!(label(&root, foreign), "/elsewhere/m.onnx");
        let _ = std::fs::remove_dir_all(&root);
    }
}
