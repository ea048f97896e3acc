//! Compiles every GLSL shader under `shaders/` to SPIR-V in OUT_DIR, so SPIR-V is never
//! committed and a shader edit rebuilds the program. Shader `shaders/a/b.comp` becomes
//! `OUT_DIR/shaders/a/b.comp.spv`, embedded with `include_bytes!` through `gpu::shader!`.
//!
//! Two directives in a shader's leading comment lines shape its build:
//! - `// variants: FP16 IMAGE_IN` builds one SPIR-V per subset of those defines, named after the
//!   defines in lower case: `b.comp.spv`, `b.comp.fp16.spv`, `b.comp.image_in.spv`,
//!   `b.comp.fp16.image_in.spv` (one source, every variant: fp32/fp16 through a type macro).
//! - `// compiler: glslang` compiles with the `glslang` crate to SPIR-V 1.6 instead of the
//!   system's `glslc` (Debian 12's glslc cannot compile cooperative-matrix shaders).

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
        let text = std::fs::read_to_string(src).unwrap();
        let directives = Directives::parse(&text);
        for defines in directives.subsets() {
            let mut name = rel.display().to_string();
            for d in &defines {
                name.push('.');
                name.push_str(&d.to_lowercase());
            }
            let dst = out.join(format!("{name}.spv"));
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            let result = if directives.glslang {
                compile_glslang(&root, &text, &defines, &dst)
            } else {
                compile_glslc(&root, src, &defines, &dst)
            };
            if let Err(e) = result {
                failures.push(format!("{name}:\n{e}"));
            }
        }
    }
    if !failures.is_empty() {
        panic!("shader compilation failed:\n{}", failures.join("\n"));
    }
}

/// What a shader's leading `//` comment lines ask of the build.
struct Directives {
    variants: Vec<String>,
    glslang: bool,
}

impl Directives {
    fn parse(text: &str) -> Self {
        let mut d = Directives {
            variants: Vec::new(),
            glslang: false,
        };
        for line in text
            .lines()
            .take_while(|l| l.starts_with("//") || l.starts_with('#'))
        {
            let line = line.trim_start_matches('/').trim();
            if let Some(v) = line.strip_prefix("variants:") {
                d.variants = v.split_whitespace().map(str::to_string).collect();
            } else if let Some(c) = line.strip_prefix("compiler:") {
                d.glslang = c.trim() == "glslang";
            }
        }
        d
    }

    /// Every subset of the variant defines, in declaration order (the empty one first).
    fn subsets(&self) -> Vec<Vec<String>> {
        (0..1u32 << self.variants.len())
            .map(|mask| {
                self.variants
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .collect()
    }
}

fn compile_glslc(root: &Path, src: &Path, defines: &[String], dst: &Path) -> Result<(), String> {
    let result = Command::new("glslc")
        .args(["-O", "--target-env=vulkan1.3", "-Werror", "-I"])
        .arg(root)
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(src)
        .arg("-o")
        .arg(dst)
        .output();
    match result {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
        Err(e) => {
            panic!("cannot run `glslc` ({e}): install it with `make setup` (Debian package glslc)")
        }
    }
}

/// Compiles with the vendored glslang (SPIR-V 1.6, Vulkan 1.3). `#include "x"` lines are
/// expanded here, from `shaders/`, nested ones too; defines go right after `#version`.
fn compile_glslang(root: &Path, text: &str, defines: &[String], dst: &Path) -> Result<(), String> {
    use glslang::{Compiler, CompilerOptions, ShaderInput, ShaderSource, ShaderStage, Target};
    let mut source = String::new();
    for line in text.lines() {
        expand_line(root, line, &mut source, 0)?;
        if line.starts_with("#version") {
            for d in defines {
                source.push_str(&format!("#define {d}\n"));
            }
        }
    }
    let compiler = Compiler::acquire().ok_or("glslang could not be initialised")?;
    let options = CompilerOptions {
        target: Target::Vulkan {
            version: glslang::VulkanVersion::Vulkan1_3,
            spirv_version: glslang::SpirvVersion::SPIRV1_6,
        },
        ..Default::default()
    };
    let source = ShaderSource::from(source);
    let input = ShaderInput::new(&source, ShaderStage::Compute, &options, None, None)
        .map_err(|e| e.to_string())?;
    let words = compiler
        .create_shader(input)
        .map_err(|e| e.to_string())?
        .compile()
        .map_err(|e| e.to_string())?;
    check_blocks(&words)?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(dst, bytes).map_err(|e| e.to_string())
}

/// Checks that every instruction of a function body lies in a block (after an OpLabel, before
/// the block's terminator). The vendored glslang has emitted a global constant's short-circuit
/// initializer after main's OpReturn; Debian 12's spirv-val predates cooperative matrices, and
/// NVIDIA's driver crashes on such a module, so the build refuses it instead.
fn check_blocks(words: &[u32]) -> Result<(), String> {
    const FUNCTION: u32 = 54;
    const FUNCTION_PARAMETER: u32 = 55;
    const FUNCTION_END: u32 = 56;
    const LABEL: u32 = 248;
    // OpBranch, OpBranchConditional, OpSwitch, OpKill, OpReturn, OpReturnValue,
    // OpUnreachable, OpTerminateInvocation.
    const TERMINATORS: [u32; 8] = [249, 250, 251, 252, 253, 254, 255, 4416];
    let (mut at, mut index) = (5, 0);
    let (mut in_function, mut in_block) = (false, false);
    while at < words.len() {
        let (opcode, count) = (words[at] & 0xffff, (words[at] >> 16) as usize);
        if count == 0 {
            return Err(format!("SPIR-V instruction {index} has a word count of 0"));
        }
        match opcode {
            FUNCTION => in_function = true,
            FUNCTION_END => (in_function, in_block) = (false, false),
            LABEL => in_block = true,
            FUNCTION_PARAMETER => {}
            _ if in_function && !in_block => {
                return Err(format!(
                    "SPIR-V instruction {index} (opcode {opcode}) lies outside any block \
                     (glslang's output is malformed; rewrite the construct it follows)"
                ));
            }
            _ if TERMINATORS.contains(&opcode) => in_block = false,
            _ => {}
        }
        at += count;
        index += 1;
    }
    Ok(())
}

/// Appends `line` to `out`, replaced by the file's text (expanded the same way) when it is an
/// `#include "x"` of a file under `root`.
fn expand_line(root: &Path, line: &str, out: &mut String, depth: usize) -> Result<(), String> {
    let Some(inc) = line.trim().strip_prefix("#include") else {
        out.push_str(line);
        out.push('\n');
        return Ok(());
    };
    let file = inc.trim().trim_matches('"');
    if depth > 8 {
        return Err(format!("{file}: includes nested more than 8 deep"));
    }
    let path = root.join(file);
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
    for l in text.lines() {
        expand_line(root, l, out, depth + 1)?;
    }
    Ok(())
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
