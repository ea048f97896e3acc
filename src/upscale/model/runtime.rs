//! Finding and loading the ONNX Runtime shared library (once per process).

use std::ffi::{c_char, c_int, CStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;

use super::ModelError;

/// File name the set-up script and most distributions use for the runtime.
pub const RUNTIME_FILE_NAME: &str = "libonnxruntime.so";
/// Where the set-up script puts the runtime, relative to the repository (or the executable).
pub const DEPS_DIR: &str = ".deps/onnxruntime";
pub const RUNTIME_ENV_VAR: &str = "ORT_DYLIB_PATH";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeSource {
    Config,
    EnvVar,
    DepsDir,
    /// Bare file name: the dynamic loader searches its usual paths.
    System,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeLocation {
    pub path: PathBuf,
    pub source: RuntimeSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeInfo {
    pub path: PathBuf,
    pub version: String,
    /// Execution providers compiled into the loaded library (ONNX Runtime's `GetAvailableProviders`).
    pub providers: Vec<String>,
}

struct Runtime {
    info: RuntimeInfo,
    env: Environment,
}

/// ONNX Runtime allows one environment per process and `ort` keeps the first loaded
/// library forever, so the first outcome (success or failure) is the only one.
static RUNTIME: OnceLock<Result<Runtime, ModelError>> = OnceLock::new();

/// Where the ONNX Runtime library comes from, first match wins: the configured path,
/// `ORT_DYLIB_PATH`, `<repo or exe dir>/.deps/onnxruntime/libonnxruntime.so[.<version>]`,
/// then the bare name `libonnxruntime.so` for the system loader.
///
/// A configured path or `ORT_DYLIB_PATH` that does not exist is an error rather than a
/// fall-through: silently using a different library than the one asked for hides mistakes.
pub fn locate_runtime(configured: Option<&Path>) -> Result<RuntimeLocation, ModelError> {
    locate_runtime_in(
        configured,
        std::env::var_os(RUNTIME_ENV_VAR),
        &search_roots(),
    )
}

/// [`locate_runtime`] with its inputs made explicit, for tests.
pub fn locate_runtime_in(
    configured: Option<&Path>,
    env_value: Option<OsString>,
    roots: &[PathBuf],
) -> Result<RuntimeLocation, ModelError> {
    if let Some(path) = configured {
        check_runtime_path(path)?;
        return Ok(RuntimeLocation {
            path: path.to_path_buf(),
            source: RuntimeSource::Config,
        });
    }
    if let Some(value) = env_value.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        check_runtime_path(&path).map_err(|_| ModelError::RuntimeMissing {
            searched: format!("{RUNTIME_ENV_VAR}={} (file does not exist)", path.display()),
        })?;
        return Ok(RuntimeLocation {
            path,
            source: RuntimeSource::EnvVar,
        });
    }
    for root in roots {
        if let Some(path) = find_in_deps(&root.join(DEPS_DIR)) {
            return Ok(RuntimeLocation {
                path,
                source: RuntimeSource::DepsDir,
            });
        }
    }
    Ok(RuntimeLocation {
        path: PathBuf::from(RUNTIME_FILE_NAME),
        source: RuntimeSource::System,
    })
}

/// The working directory and the executable's directory with a few parents, so both
/// `cargo run` (exe in target/<profile>/) and test binaries (target/<profile>/deps/)
/// find the repository's `.deps`.
fn search_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd);
    }
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        roots.extend(exe_dir.ancestors().take(4).map(Path::to_path_buf));
    }
    roots
}

/// The set-up script installs only the versioned file (`libonnxruntime.so.1.30.0`), so
/// accept that when the unversioned name is absent; the highest version wins.
fn find_in_deps(dir: &Path) -> Option<PathBuf> {
    let plain = dir.join(RUNTIME_FILE_NAME);
    if plain.is_file() {
        return Some(plain);
    }
    let prefix = format!("{RUNTIME_FILE_NAME}.");
    let mut versioned: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name.strip_prefix(&prefix)?;
            let parts = version
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            entry.path().is_file().then(|| (parts, entry.path()))
        })
        .collect();
    versioned.sort();
    versioned.pop().map(|(_, path)| path)
}

/// Checks a runtime path without loading it, so a wrong path can be reported (and
/// tested) without spending the process's single initialisation. A bare file name is
/// accepted as-is because the system loader resolves it.
pub fn check_runtime_path(path: &Path) -> Result<(), ModelError> {
    let bare_name = path.parent().is_none_or(|p| p.as_os_str().is_empty());
    if bare_name || path.is_file() {
        return Ok(());
    }
    Err(ModelError::RuntimeMissing {
        searched: format!(
            "{} ({})",
            path.display(),
            if path.exists() {
                "not a file"
            } else {
                "file does not exist"
            }
        ),
    })
}

/// Loads ONNX Runtime from `path` and creates the process-wide environment. Only the
/// first call does any work; later calls return the first outcome (with a warning if
/// they asked for a different path).
pub fn init_runtime(path: &Path) -> Result<RuntimeInfo, ModelError> {
    let outcome = RUNTIME.get_or_init(|| load_runtime(path));
    if outcome.as_ref().is_ok_and(|rt| rt.info.path != path) {
        let rt = outcome.as_ref().unwrap();
        tracing::warn!(
            requested = %path.display(),
            loaded = %rt.info.path.display(),
            "ONNX Runtime is already loaded for this process; ignoring the new path"
        );
    }
    outcome
        .as_ref()
        .map(|rt| rt.info.clone())
        .map_err(Clone::clone)
}

/// The environment from [`init_runtime`]; initialises from [`locate_runtime`]`(None)`
/// if nothing did yet, so library users that never configure a path still work.
pub(super) fn environment() -> Result<(&'static Environment, &'static RuntimeInfo), ModelError> {
    if RUNTIME.get().is_none() {
        let location = locate_runtime(None)?;
        init_runtime(&location.path)?;
    }
    match RUNTIME.get() {
        Some(Ok(rt)) => Ok((&rt.env, &rt.info)),
        Some(Err(e)) => Err(e.clone()),
        None => unreachable!("init_runtime always fills RUNTIME"),
    }
}

fn load_runtime(path: &Path) -> Result<Runtime, ModelError> {
    check_runtime_path(path)?;
    let load_err = |reason: String| ModelError::RuntimeLoad {
        path: path.to_path_buf(),
        reason,
    };
    // `ort::init_from` returns an error for a missing or incompatible library, unlike
    // `ort::init()` + ORT_DYLIB_PATH which panics inside `ort::api()`.
    let env = ort::init_from(path)
        .map_err(|e| load_err(e.to_string()))?
        .with_name("upscale-demo")
        .build()
        .map_err(|e| load_err(e.to_string()))?;
    let providers = available_providers().map_err(load_err)?;
    let info = RuntimeInfo {
        path: path.to_path_buf(),
        version: loaded_version(path).unwrap_or_else(|| version_from_build_info(ort::info())),
        providers,
    };
    tracing::info!(path = %path.display(), version = %info.version, providers = ?info.providers, "ONNX Runtime loaded");
    Ok(Runtime { info, env })
}

/// `ort` checks `OrtApiBase::GetVersionString` while loading but does not expose it, so
/// ask the already-loaded library again. `RTLD_NOLOAD` only takes a reference to the
/// copy `ort` loaded; it never loads a second one.
#[cfg(unix)]
fn loaded_version(path: &Path) -> Option<String> {
    use std::ffi::c_void;
    use std::os::unix::ffi::OsStrExt;

    const RTLD_NOW: c_int = 2;
    const RTLD_NOLOAD: c_int = 4;
    unsafe extern "C" {
        fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
        fn dlclose(handle: *mut c_void) -> c_int;
    }

    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: plain libdl calls; `OrtGetApiBase` has this signature in every ORT release
    // and returns a static table whose version string is static too.
    unsafe {
        let handle = dlopen(c_path.as_ptr(), RTLD_NOW | RTLD_NOLOAD);
        if handle.is_null() {
            return None;
        }
        let sym = dlsym(handle, c"OrtGetApiBase".as_ptr());
        let version = (!sym.is_null()).then(|| {
            let get_base: unsafe extern "C" fn() -> *const ort::sys::OrtApiBase =
                std::mem::transmute(sym);
            let base = get_base();
            (!base.is_null()).then(|| {
                CStr::from_ptr(((*base).GetVersionString)())
                    .to_string_lossy()
                    .into_owned()
            })
        });
        dlclose(handle);
        version.flatten()
    }
}

#[cfg(not(unix))]
fn loaded_version(_path: &Path) -> Option<String> {
    None
}

/// Fallback: release builds carry the branch in the build info (`git-branch=rel-1.30.0`);
/// the PyPI wheel says `git-branch=HEAD`, hence the `dlsym` route above.
fn version_from_build_info(build_info: &str) -> String {
    build_info
        .split(',')
        .find_map(|part| part.trim().split_once("git-branch=").map(|(_, b)| b))
        .map(|branch| branch.strip_prefix("rel-").unwrap_or(branch).to_string())
        .unwrap_or_else(|| build_info.trim().to_string())
}

/// `ort` only uses `GetAvailableProviders` privately (`ep::is_ep_available`), so call
/// the C API directly to list them all.
fn available_providers() -> Result<Vec<String>, String> {
    let api = ort::api();
    let mut list: *mut *mut c_char = std::ptr::null_mut();
    let mut count: c_int = 0;
    // SAFETY: out-pointers are valid; on success ORT hands us `count` C strings that we
    // copy and then release with the matching `ReleaseAvailableProviders`.
    unsafe {
        ort::Error::result_from_status((api.GetAvailableProviders)(&mut list, &mut count))
            .map_err(|e| format!("GetAvailableProviders failed: {e}"))?;
        if list.is_null() {
            return Ok(Vec::new());
        }
        let names = (0..count.max(0) as usize)
            .map(|i| CStr::from_ptr(*list.add(i)).to_string_lossy().into_owned())
            .collect();
        let _ = ort::Error::result_from_status((api.ReleaseAvailableProviders)(list, count));
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("upscale-locate-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(DEPS_DIR)).unwrap();
        dir
    }

    #[test]
    fn configured_path_wins_and_must_exist() {
        let root = temp_dir("config");
        let lib = root.join("custom.so");
        std::fs::write(&lib, b"x").unwrap();
        let loc = locate_runtime_in(
            Some(&lib),
            Some("/nope".into()),
            std::slice::from_ref(&root),
        )
        .unwrap();
        assert_eq!(loc.source, RuntimeSource::Config);
        assert_eq!(loc.path, lib);

        let missing = root.join("missing.so");
        let err = locate_runtime_in(Some(&missing), None, &[]).unwrap_err();
        assert!(matches!(err, ModelError::RuntimeMissing { .. }), "{err:?}");
        assert!(err.to_string().contains("missing.so"), "{err}");
    }

    #[test]
    fn env_var_then_deps_then_system() {
        let root = temp_dir("order");
        let lib = root.join("env.so");
        std::fs::write(&lib, b"x").unwrap();
        let loc =
            locate_runtime_in(None, Some(lib.clone().into()), std::slice::from_ref(&root)).unwrap();
        assert_eq!(loc.source, RuntimeSource::EnvVar);

        let err = locate_runtime_in(None, Some("/definitely/not/here.so".into()), &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("ORT_DYLIB_PATH=/definitely/not/here.so"),
            "{err}"
        );

        let loc = locate_runtime_in(None, Some("".into()), std::slice::from_ref(&root)).unwrap();
        assert_eq!(loc.source, RuntimeSource::System);
        assert_eq!(loc.path, PathBuf::from(RUNTIME_FILE_NAME));

        let deps = root.join(DEPS_DIR);
        std::fs::write(deps.join("libonnxruntime.so.1.9.0"), b"x").unwrap();
        std::fs::write(deps.join("libonnxruntime.so.1.30.0"), b"x").unwrap();
        let loc = locate_runtime_in(None, None, &[root.join("elsewhere"), root.clone()]).unwrap();
        assert_eq!(loc.source, RuntimeSource::DepsDir);
        assert_eq!(loc.path, deps.join("libonnxruntime.so.1.30.0"));

        std::fs::write(deps.join(RUNTIME_FILE_NAME), b"x").unwrap();
        let loc = locate_runtime_in(None, None, std::slice::from_ref(&root)).unwrap();
        assert_eq!(loc.path, deps.join(RUNTIME_FILE_NAME));
    }

    #[test]
    fn wrong_runtime_path_is_rejected_before_loading() {
        let err = check_runtime_path(Path::new("/no/such/dir/libonnxruntime.so")).unwrap_err();
        assert!(matches!(err, ModelError::RuntimeMissing { .. }));
        assert!(
            err.to_string().contains("/no/such/dir/libonnxruntime.so"),
            "{err}"
        );
        check_runtime_path(Path::new(RUNTIME_FILE_NAME)).unwrap();
    }

    #[test]
    fn version_is_taken_from_build_info() {
        let info = "ORT Build Info: git-branch=rel-1.30.0, git-commit-id=abc, build type=Release";
        assert_eq!(version_from_build_info(info), "1.30.0");
        assert_eq!(version_from_build_info("odd"), "odd");
    }
}
