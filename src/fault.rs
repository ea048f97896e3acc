//! Fault injection: makes the k-th fallible step of start-up or of a switch fail on purpose, so
//! every early return on those paths runs (and its cleanup is checked at teardown) without
//! waiting for a real allocation or driver failure.
//!
//! A step is a load-time creation that can fail: an image, a buffer, a pipeline, an imported
//! or exported buffer, a model load, an ONNX Runtime session, a CUDA import. Each calls
//! [`check`] just before the call that could fail. Nothing is counted unless a run is armed;
//! then `check` costs one relaxed atomic load. Per-frame code never calls it.
//!
//! Armed in-process by [`start`] and read back by [`stop`] (tests count the steps a clean run
//! passes, then fail each one in turn), or for the binary by `UPSCALE_FAULT_AT=k`: the k-th
//! step from the program's start fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The environment variable that arms the binary: `UPSCALE_FAULT_AT=k` fails step k (1-based).
pub const ENV_VAR: &str = "UPSCALE_FAULT_AT";

/// The error a failed step returns; the callers' error types convert it, so the message reaches
/// the notice or the run's error unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("injected fault at step {step} ({what})")]
pub struct Fault {
    pub step: u32,
    /// The step's kind and object: `image: scene colour`.
    pub what: String,
}

/// What an armed stretch of the program passed through.
#[derive(Clone, Debug, Default)]
pub struct Record {
    /// Every step counted, in order (`steps[k - 1]` is step k).
    pub steps: Vec<String>,
    /// The step that was made to fail, if the run reached it.
    pub fired: Option<Fault>,
}

/// Read by every [`check`]: off unless a run is armed.
static ARMED: AtomicBool = AtomicBool::new(false);

struct State {
    /// The step to fail (1-based); None: count only.
    fail_at: Option<u32>,
    record: Record,
}

static STATE: Mutex<State> = Mutex::new(State {
    fail_at: None,
    record: Record {
        steps: Vec::new(),
        fired: None,
    },
});

fn state() -> std::sync::MutexGuard<'static, State> {
    // A panic elsewhere while holding the lock leaves plain data: keep using it.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// One fallible step: `kind` says what is made (`image`, `compute pipeline`), `name` which one.
/// Fails only at the armed step.
#[inline]
pub fn check(kind: &'static str, name: &str) -> Result<(), Fault> {
    if !ARMED.load(Ordering::Relaxed) {
        return Ok(());
    }
    counted(kind, name)
}

#[cold]
fn counted(kind: &'static str, name: &str) -> Result<(), Fault> {
    let mut s = state();
    let what = format!("{kind}: {name}");
    s.record.steps.push(what.clone());
    let step = s.record.steps.len() as u32;
    if s.fail_at != Some(step) {
        return Ok(());
    }
    let fault = Fault { step, what };
    tracing::warn!("{fault}");
    s.record.fired = Some(fault.clone());
    Err(fault)
}

/// Starts counting steps from zero; `fail_at`: the step that fails (1-based), None to only count.
pub fn start(fail_at: Option<u32>) {
    let mut s = state();
    s.fail_at = fail_at;
    s.record = Record::default();
    ARMED.store(true, Ordering::Relaxed);
}

/// Stops counting and returns what the armed stretch passed.
pub fn stop() -> Record {
    let mut s = state();
    ARMED.store(false, Ordering::Relaxed);
    s.fail_at = None;
    std::mem::take(&mut s.record)
}

/// Arms the program from `UPSCALE_FAULT_AT` when it is set (the k-th step from here fails).
pub fn arm_from_env() -> anyhow::Result<()> {
    let Ok(value) = std::env::var(ENV_VAR) else {
        return Ok(());
    };
    let k = parse_step(&value)?;
    tracing::warn!("{ENV_VAR}={k}: step {k} of this run will fail on purpose");
    start(Some(k));
    Ok(())
}

fn parse_step(value: &str) -> anyhow::Result<u32> {
    match value.trim().parse::<u32>() {
        Ok(k) if k > 0 => Ok(k),
        _ => anyhow::bail!("{ENV_VAR}={value:?}: must be a step number, 1 or more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_numbers_are_positive_integers() {
        assert_eq!(parse_step("7").unwrap(), 7);
        assert_eq!(parse_step(" 12 ").unwrap(), 12);
        for bad in ["0", "-1", "x", ""] {
            let e = parse_step(bad).unwrap_err().to_string();
            assert!(e.contains("must be a step number, 1 or more"), "{e}");
        }
    }

    #[test]
    fn unarmed_checks_never_fail() {
        // Other unit tests in this binary never arm; counting state is not touched here.
        for _ in 0..3 {
            check("image", "x").unwrap();
        }
    }

    #[test]
    fn the_message_names_step_kind_and_object() {
        let f = Fault {
            step: 7,
            what: "image: scene colour".into(),
        };
        assert_eq!(
            f.to_string(),
            "injected fault at step 7 (image: scene colour)"
        );
    }
}
