//! Compiles every GLSL shader under `shaders/` to SPIR-V in OUT_DIR with `glslc`, so SPIR-V is
//! never committed and a shader edit rebuilds the program. Shader `shaders/a/b.comp` becomes
//! `OUT_DIR/shaders/a/b.comp.spv`, embedded with `include_bytes!` through `gpu::shader!`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    build_commit();
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("shaders");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("shaders");
    println!("cargo:rerun-if-changed=shaders");
    let mut sources = Vec::new();
    collect(&root, &mut sources);
    let mut failures = Vec::new();
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let rel = src.strip_prefix(&root).unwrap();
        let dst = out.join(format!("{}.spv", rel.display()));
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        let result = Command::new("glslc")
            .args(["-O", "--target-env=vulkan1.3", "-Werror", "-I"])
            .arg(&root)
            .arg(src)
            .arg("-o")
            .arg(&dst)
            .output();
        match result {
            Ok(o) if o.status.success() => {}
            Ok(o) => failures.push(format!(
                "{}:\n{}",
                src.display(),
                String::from_utf8_lossy(&o.stderr)
            )),
            Err(e) => panic!(
                "cannot run `glslc` ({e}): install it with `make setup` (Debian package glslc)"
            ),
        }
    }
    if !failures.is_empty() {
        panic!("shader compilation failed:\n{}", failures.join("\n"));
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("vert" | "frag" | "comp")
        ) {
            out.push(path);
        }
    }
}

/// The commit the program is built from, for reports (`UPSCALE_BUILD_COMMIT`, empty without
/// git): a binary carried to another machine cannot ask that machine's checkout.
fn build_commit() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=UPSCALE_BUILD_COMMIT={commit}");
    // Re-run when HEAD moves (a commit, a checkout). Cargo re-runs a build script whose watched
    // path is missing on every build, so only paths that exist are watched: a fresh clone may
    // have no packed-refs, and a worktree keeps its HEAD apart from the shared refs.
    // `--git-path` resolves each one for a plain checkout and a worktree (`.git` a file) alike.
    let path = |name: &str| git(&["rev-parse", "--path-format=absolute", "--git-path", name]);
    let mut watched: Vec<String> = ["HEAD", "packed-refs"]
        .into_iter()
        .filter_map(path)
        .collect();
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        // The branch's own ref file, not all of refs/heads (which other worktrees' commits
        // touch); while the ref is packed, its folder, so that the loose file's creation is seen.
        match path(&branch) {
            Some(file) if Path::new(&file).exists() => watched.push(file),
            Some(file) => {
                watched.extend(Path::new(&file).parent().map(|p| p.display().to_string()))
            }
            None => {}
        }
    }
    for p in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={p}");
    }
}
