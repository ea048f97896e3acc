//! Recording and submitting one frame's command buffers: the scene pass and the upscaler's first
//! part (command buffer A), the upscaler's second part after a host or other-API step (B), and the
//! tail (compare view, composite, captures, UI) with the submission that signals the slot's fence.

use anyhow::Context as _;
use ash::vk;

use super::{Renderer, Target, UiFrame};
use crate::game::world::World;
use crate::gpu::barrier::{self, Transition};
use crate::gpu::{self, frame, Gpu};
use crate::upscale::{FrameIo, HostTimes, Schedule};

impl Renderer {
    /// Scene pass and the upscaler's first part, into `cmd[0]`.
    ///
    /// # Safety
    /// This slot's fence was waited on ([`Renderer::render`] begins the slot first), so its
    /// command buffers and the resources they record are not in use by the GPU.
    pub(super) unsafe fn record_until_split(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        world: &World,
    ) -> anyhow::Result<vk::CommandBuffer> {
        let frame = &mut self.frames[slot];
        let cmd = frame.cmd[0];
        frame::begin(gpu, cmd)?;
        let span = frame.timestamps.begin(gpu, cmd, "scene");
        self.scene.record(gpu, cmd, &self.targets, world);
        frame.timestamps.end(gpu, cmd, span);
        let span = frame.timestamps.begin(gpu, cmd, "upscale");
        let write = self
            .output
            .transition(barrier::REUSE, barrier::UPSCALE_WRITE);
        barrier::transition(&gpu.device, cmd, &[write]);
        let mut io = FrameIo {
            gpu,
            cmd,
            slot,
            inputs: self.targets.frame_inputs(self.frame_reset),
            output: &self.output,
            timestamps: &mut frame.timestamps,
        };
        self.upscaler.record(&mut io)?;
        if self.upscaler.schedule() == Schedule::Single {
            frame.timestamps.end(gpu, cmd, span);
        } else {
            // The span closes in the second command buffer: `upscale` then covers the whole
            // latency from scene end to output ready, host step included.
            self.open_span = Some(span);
        }
        Ok(cmd)
    }

    /// Submits command buffer A signalling the next timeline value, which it returns, and
    /// `extra` = (semaphore, value) of a pattern's own timeline.
    ///
    /// # Safety
    /// `cmd_a` is recording and holds the first half of this frame.
    pub(super) unsafe fn submit_first(
        &mut self,
        gpu: &Gpu,
        cmd_a: vk::CommandBuffer,
        extra: Option<(vk::Semaphore, u64)>,
    ) -> anyhow::Result<u64> {
        gpu.device.end_command_buffer(cmd_a)?;
        self.timeline_value += 1;
        let value = self.timeline_value;
        let cmds = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd_a)];
        let signal = |semaphore, value| {
            vk::SemaphoreSubmitInfo::default()
                .semaphore(semaphore)
                .value(value)
                .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
        };
        let mut signals = vec![signal(self.timeline, value)];
        signals.extend(extra.map(|(s, v)| signal(s, v)));
        let submit = vk::SubmitInfo2::default()
            .command_buffer_infos(&cmds)
            .signal_semaphore_infos(&signals);
        gpu.device
            .queue_submit2(gpu.queue, &[submit], vk::Fence::null())?;
        Ok(value)
    }

    /// Begins command buffer B with the upscaler's second part and closes the `upscale` span.
    ///
    /// # Safety
    /// This slot's fence was waited on; command buffer B is not pending.
    pub(super) unsafe fn begin_second(
        &mut self,
        gpu: &Gpu,
        slot: usize,
    ) -> anyhow::Result<vk::CommandBuffer> {
        let frame = &mut self.frames[slot];
        let cmd_b = frame.cmd[1];
        frame::begin(gpu, cmd_b)?;
        let mut io = FrameIo {
            gpu,
            cmd: cmd_b,
            slot,
            inputs: self.targets.frame_inputs(self.frame_reset),
            output: &self.output,
            timestamps: &mut frame.timestamps,
        };
        self.upscaler.record_after(&mut io)?;
        if let Some(span) = self.open_span.take() {
            frame.timestamps.end(gpu, cmd_b, span);
        }
        Ok(cmd_b)
    }

    /// Submits the frame recorded so far in `cmd` (scene and pre-process) and its tail as the
    /// upscaler's schedule says: one submission, or two around a host step, a host-signalled or
    /// a device-signalled timeline value (README: how the patterns split a frame).
    ///
    /// # Safety
    /// `cmd` is this slot's first command buffer, recording and never submitted; the slot's
    /// fence was waited on.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn submit_by_schedule(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        cmd: vk::CommandBuffer,
        world: &World,
        target: &Target,
        ui: Option<&UiFrame>,
        host: &mut HostTimes,
    ) -> anyhow::Result<()> {
        match self.upscaler.schedule() {
            Schedule::Single => {
                self.record_tail(gpu, slot, cmd, world, target, ui)?;
                self.submit_tail(gpu, slot, cmd, target, None)?;
            }
            Schedule::HostStep => {
                let value = self.submit_first(gpu, cmd, None)?;
                frame::wait_timeline(gpu, self.timeline, value)?;
                self.upscaler.run_host(gpu, slot, host)?;
                let cmd_b = self.begin_second(gpu, slot)?;
                self.record_tail(gpu, slot, cmd_b, world, target, ui)?;
                self.submit_tail(gpu, slot, cmd_b, target, None)?;
            }
            Schedule::HostSignal => {
                let value = self.submit_first(gpu, cmd, None)?;
                let cmd_b = self.begin_second(gpu, slot)?;
                self.record_tail(gpu, slot, cmd_b, world, target, ui)?;
                let wait = (self.timeline, value + 1);
                self.submit_tail(gpu, slot, cmd_b, target, Some(wait))?;
                frame::wait_timeline(gpu, self.timeline, value)?;
                let ran = self.upscaler.run_host(gpu, slot, host);
                // Signal even when the host step failed: B is already waiting on the GPU.
                frame::signal_timeline(gpu, self.timeline, value + 1)?;
                self.timeline_value = value + 1;
                ran?;
            }
            Schedule::DeviceSignal => {
                let sync = self
                    .upscaler
                    .device_sync()
                    .context("a DeviceSignal pattern gave no semaphore values")?;
                self.submit_first(gpu, cmd, Some((sync.semaphore, sync.signal)))?;
                // Queued before B is recorded; it gives `sync.wait` even when it fails.
                let ran = self.upscaler.run_device(gpu, slot, host);
                let cmd_b = self.begin_second(gpu, slot)?;
                self.record_tail(gpu, slot, cmd_b, world, target, ui)?;
                let wait = (sync.semaphore, sync.wait);
                self.submit_tail(gpu, slot, cmd_b, target, Some(wait))?;
                ran?;
            }
        }
        Ok(())
    }

    /// The compare view's work (when on), output to SAMPLED, composite onto the target,
    /// optional capture, UI, final state.
    ///
    /// # Safety
    /// `cmd` is this slot's recording command buffer, outside a rendering scope; `target`'s
    /// image is in `target.initial` and not used by any pending submission.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn record_tail(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        cmd: vk::CommandBuffer,
        world: &World,
        target: &Target,
        ui: Option<&UiFrame>,
    ) -> anyhow::Result<()> {
        let device = &gpu.device;
        self.record_composite(gpu, slot, cmd, world, target)?;
        self.record_captures(device, cmd, target, false);
        let span = self.frames[slot].timestamps.begin(gpu, cmd, "ui");
        if let Some(ui) = ui {
            self.record_ui(gpu, cmd, target, ui)?;
        }
        self.frames[slot].timestamps.end(gpu, cmd, span);
        self.record_captures(device, cmd, target, true);
        barrier::transition(
            device,
            cmd,
            &[Transition {
                image: target.image,
                range: barrier::color_range(),
                from: barrier::COLOR_WRITE,
                to: target.final_state,
            }],
        );
        device.end_command_buffer(cmd)?;
        Ok(())
    }

    /// The compare view's work (when on), then the upscaled output (or the compare view's split)
    /// composited onto the target, which ends in COLOR_WRITE.
    ///
    /// # Safety
    /// As [`Renderer::record_tail`].
    unsafe fn record_composite(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        cmd: vk::CommandBuffer,
        world: &World,
        target: &Target,
    ) -> anyhow::Result<()> {
        let device = &gpu.device;
        let timestamps = &mut self.frames[slot].timestamps;
        let mut output_state = barrier::UPSCALE_WRITE;
        if let Some(compare) = &mut self.compare {
            let span = timestamps.begin(gpu, cmd, "compare");
            output_state = compare.record(
                gpu,
                cmd,
                slot,
                self.frame_number,
                &mut self.scene,
                world,
                self.targets.frame_inputs(self.frame_reset),
                &self.output,
            )?;
            timestamps.end(gpu, cmd, span);
        }
        let span = timestamps.begin(gpu, cmd, "composite");
        // The compute pass writes the target as a storage image (GENERAL), then hands it to
        // the UI pass as a colour attachment; the draw renders to it as one.
        let target_write = if target.storage {
            barrier::STORAGE_WRITE
        } else {
            barrier::COLOR_WRITE
        };
        barrier::transition(
            device,
            cmd,
            &[
                Transition {
                    image: self.output.raw,
                    range: self.output.desc.range(),
                    from: output_state,
                    to: barrier::SAMPLED,
                },
                Transition {
                    image: target.image,
                    range: barrier::color_range(),
                    from: target.initial,
                    to: target_write,
                },
            ],
        );
        let split = self
            .compare
            .as_ref()
            .map(|c| (c.right_image(self.heatmap), self.divider));
        let (source, split) =
            super::temporal::composite_source(self.debug_view, &self.output, &self.targets, split);
        if target.storage {
            self.composite.record_compute(
                gpu,
                cmd,
                source,
                split,
                self.debug_view,
                target.view,
                target.extent,
            );
            barrier::transition(
                device,
                cmd,
                &[Transition {
                    image: target.image,
                    range: barrier::color_range(),
                    from: barrier::STORAGE_WRITE,
                    to: barrier::COLOR_WRITE,
                }],
            );
        } else {
            let debug = self.debug_view;
            self.composite
                .record(gpu, cmd, source, split, debug, target.view, target.extent);
        }
        timestamps.end(gpu, cmd, span);
        Ok(())
    }

    /// Copies the target and/or the low-resolution input to their capture buffers
    /// (screenshots, headless `last.png`, the tests' readbacks), when the target asks for them:
    /// called before the UI (`after_ui` false) and after it; each capture is taken once, at the
    /// point its target asks for.
    ///
    /// # Safety
    /// `cmd` is recording outside a rendering scope; the target is in COLOR_WRITE and the scene
    /// image in SAMPLED.
    unsafe fn record_captures(
        &self,
        device: &ash::Device,
        cmd: vk::CommandBuffer,
        target: &Target,
        after_ui: bool,
    ) {
        let capture = target
            .capture
            .filter(|_| target.capture_with_ui == after_ui);
        if let Some(buffer) = capture {
            gpu::image::record_capture(
                device,
                cmd,
                target.image,
                target.extent,
                barrier::COLOR_WRITE,
                buffer,
            );
        }
        if let Some(buffer) = target.capture_input.filter(|_| !after_ui) {
            let input = &self.targets.color;
            gpu::image::record_capture(
                device,
                cmd,
                input.raw,
                input.extent(),
                barrier::SAMPLED,
                buffer,
            );
        }
    }

    /// The egui overlay, loaded over the composited picture.
    ///
    /// # Safety
    /// `cmd` is recording outside a rendering scope; the target is in COLOR_WRITE.
    unsafe fn record_ui(
        &mut self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        target: &Target,
        ui: &UiFrame,
    ) -> anyhow::Result<()> {
        let device = &gpu.device;
        let color = [vk::RenderingAttachmentInfo::default()
            .image_view(target.view)
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::LOAD)
            .store_op(vk::AttachmentStoreOp::STORE)];
        let info = vk::RenderingInfo::default()
            .render_area(vk::Rect2D {
                offset: vk::Offset2D::default(),
                extent: target.extent,
            })
            .layer_count(1)
            .color_attachments(&color);
        device.cmd_begin_rendering(cmd, &info);
        self.egui
            .cmd_draw(cmd, target.extent, ui.pixels_per_point, ui.primitives)?;
        device.cmd_end_rendering(cmd);
        Ok(())
    }

    /// Submits the frame's last command buffer: waits for the swapchain image (and, for
    /// [`Schedule::HostSignal`] / [`Schedule::DeviceSignal`], for `timeline_wait` = (semaphore,
    /// value) given by the host or the other API), signals present-ready and the slot's fence.
    ///
    /// # Safety
    /// `cmd` was ended by [`Renderer::record_tail`]; the slot's fence is signalled (waited on
    /// when the slot began), so resetting it here is allowed.
    pub(super) unsafe fn submit_tail(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        cmd: vk::CommandBuffer,
        target: &Target,
        timeline_wait: Option<(vk::Semaphore, u64)>,
    ) -> anyhow::Result<()> {
        let frame = &self.frames[slot];
        let cmds = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
        let mut waits: Vec<vk::SemaphoreSubmitInfo> = target
            .wait
            .iter()
            .map(|&s| {
                vk::SemaphoreSubmitInfo::default()
                    .semaphore(s)
                    .stage_mask(vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT)
            })
            .collect();
        if let Some((semaphore, value)) = timeline_wait {
            waits.push(
                vk::SemaphoreSubmitInfo::default()
                    .semaphore(semaphore)
                    .value(value)
                    .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS),
            );
        }
        let signals: Vec<vk::SemaphoreSubmitInfo> = target
            .signal
            .iter()
            .map(|&s| {
                vk::SemaphoreSubmitInfo::default()
                    .semaphore(s)
                    .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
            })
            .collect();
        let submit = vk::SubmitInfo2::default()
            .command_buffer_infos(&cmds)
            .wait_semaphore_infos(&waits)
            .signal_semaphore_infos(&signals);
        gpu.device.reset_fences(&[frame.fence])?;
        gpu.device
            .queue_submit2(gpu.queue, &[submit], frame.fence)?;
        Ok(())
    }
}
