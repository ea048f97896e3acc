//! Model bytes → ONNX parse → graph → plan (the in-stream engine's loader, no GPU). Any panic,
//! overflow, runaway allocation or hang here is a bug: bad bytes must become an `InferError`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A dynamic-size model plans at any size; the fixed-size fixture only at 160x90.
    for (width, height) in [(8, 6), (160, 90)] {
        let _ = upscale_demo::infer::plan_from_bytes(data, "fuzz.onnx", width, height);
    }
});
