//! Pattern 2's CUDA domain where there is no CUDA (lavapipe, validation on): the Vulkan half
//! (exportable tensor memory and timeline semaphore) works, the domain detection says why CUDA
//! cannot be used, `auto` falls back to the host domain and a forced `cuda` greys the pattern
//! out with the reason. Nothing panics. The CUDA half itself runs on the GPU machine
//! (tools/device/h200_cuda.sh).

mod common;

use std::os::fd::AsRawFd;
use std::path::Path;

use ash::vk;
use upscale_demo::app::config::Config;
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::app::session::Session;
use upscale_demo::gpu::export::{self, ExportBuffer, ExportTimeline};
use upscale_demo::upscale::shared::cuda;
use upscale_demo::upscale::Pattern;

fn config(domain: &str) -> Config {
    let mut config = common::small_config();
    config.upscale.pattern = "shared-memory".into();
    config.upscale.shared_domain = domain.into();
    config.upscale.model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/tiny_x2.onnx");
    config
}

fn session(config: &Config) -> Session {
    Session::new(
        config,
        None,
        vk::Format::R8G8B8A8_UNORM,
        Pattern::SharedMemory,
    )
    .unwrap()
}

/// What stops the CUDA domain on this machine, as the overlay and summary.json say it.
fn why_not_cuda(s: &Session) -> String {
    let ml = upscale_demo::app::session::ml_settings(&s.config).unwrap();
    cuda::availability(&s.gpu, &ml).unwrap_err()
}

#[test]
fn auto_falls_back_to_the_host_domain_and_says_why() {
    let out = common::out_dir("shared_cuda_auto");
    let args = HeadlessArgs {
        frames: 4,
        out,
        ..Default::default()
    };
    let summary = headless::run(&config("auto"), &args).unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.pattern, "shared-memory");
    assert_eq!(summary.validation_errors, 0);
    assert!(
        summary
            .pattern_note
            .starts_with("domain: host · cuda domain unavailable: "),
        "{}",
        summary.pattern_note
    );
    // No NVIDIA driver here: the reason names the missing CUDA driver and the CPU-only ORT.
    assert!(
        summary
            .pattern_note
            .contains("no CUDA driver (libcuda.so.1 not found)"),
        "{}",
        summary.pattern_note
    );
    assert!(
        summary
            .pattern_note
            .contains("has no CUDAExecutionProvider"),
        "{}",
        summary.pattern_note
    );
    assert_eq!(summary.host_copy_bytes, 0);
}

#[test]
fn forced_cuda_greys_the_pattern_out_with_the_reason() {
    let s = session(&config("cuda"));
    assert_eq!(s.renderer.pattern(), Pattern::Bilinear, "fell back");
    let reason = s
        .patterns()
        .iter()
        .find(|p| p.0 == Pattern::SharedMemory)
        .unwrap()
        .1
        .clone()
        .unwrap_err();
    assert!(
        reason.starts_with("the cuda domain cannot run here: "),
        "{reason}"
    );
    assert!(reason.contains(&why_not_cuda(&s)), "{reason}");
    let notice = s.notice.clone().unwrap_or_default();
    assert!(
        notice.contains("upscale.shared_domain = \"cuda\""),
        "{notice}"
    );
    // The host domain is still there for whoever asks for it.
    let host = session(&config("host"));
    assert_eq!(host.renderer.pattern(), Pattern::SharedMemory);
    assert!(
        host.renderer.describe().starts_with("domain: host"),
        "{}",
        host.renderer.describe()
    );
}

/// The Vulkan half of the CUDA domain: device-local tensor memory and a timeline semaphore that
/// export as opaque fds, with the values the renderer and CUDA would exchange.
#[test]
fn vulkan_exports_tensor_memory_and_a_timeline_semaphore() {
    let s = session(&config("host"));
    let gpu = &s.gpu;
    assert_eq!(gpu.info.device_uuid.len(), 32, "{}", gpu.info.device_uuid);
    let usage = vk::BufferUsageFlags::STORAGE_BUFFER;
    match export::buffer_export_support(gpu, usage) {
        Ok(_) => {
            let bytes = 3 * 90 * 160 * 4;
            let buffer = ExportBuffer::new(gpu, "test export", bytes, usage).unwrap();
            assert!(buffer.allocation_size >= bytes);
            let fd = buffer.export_fd(gpu).unwrap();
            assert!(fd.as_raw_fd() >= 0);
            let second = buffer.export_fd(gpu).unwrap();
            assert_ne!(
                fd.as_raw_fd(),
                second.as_raw_fd(),
                "each export is a new fd"
            );
            drop((fd, second));
            buffer.destroy(gpu);
        }
        Err(e) => assert!(e.to_string().contains(&gpu.info.name), "{e}"),
    }
    match export::timeline_export_support(gpu) {
        Ok(()) => {
            let timeline = ExportTimeline::new(gpu, "test timeline").unwrap();
            let fd = timeline.export_fd(gpu).unwrap();
            assert!(fd.as_raw_fd() >= 0);
            assert_eq!(timeline.value(gpu).unwrap(), 0);
            timeline.signal(gpu, 2).unwrap();
            timeline.wait(gpu, 2, 1_000_000_000).unwrap();
            assert_eq!(timeline.value(gpu).unwrap(), 2);
            drop(fd);
            timeline.destroy(gpu);
        }
        Err(e) => assert!(e.to_string().contains(&gpu.info.name), "{e}"),
    }
    assert_eq!(gpu.validation_errors(), 0);
}
