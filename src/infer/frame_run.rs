//! One inference of a frame-I/O plan on host pixels (tests, `run-model`, `quality`): the
//! RGBA8 scene image is uploaded, the engine records exactly what the in-stream pattern records
//! in a frame, and the upscaled RGBA8 image is read back. Images and staging buffers are made
//! for this call; not for the frame loop.

use ash::vk;

use super::engine::Engine;
use super::error::{InferError, Result};
use super::ops::FrameImages;
use crate::gpu::barrier::{self, Transition};
use crate::gpu::guard::Destroy;
use crate::gpu::{self, Buffer, Gpu, Image, ImageDesc};

/// The RGBA8 format of the scene and upscaled images (the renderer's, see render::scene).
const FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;

impl Engine {
    /// Runs the plan on `rgba` (`width` × `height`, 4 bytes a pixel) and returns the upscaled
    /// image's pixels (its size from the plan's output shape).
    pub fn run_frame(&self, gpu: &Gpu, rgba: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
        let plan = self.plan();
        if !plan.options.frame_io {
            return Err(InferError::Input("run_frame needs a frame-I/O plan".into()));
        }
        if rgba.len() != (width * height * 4) as usize {
            return Err(InferError::Input(format!(
                "{} bytes for a {width}x{height} RGBA8 image",
                rgba.len()
            )));
        }
        let shape = &plan.tensors[plan.outputs[0]].shape;
        let out = vk::Extent2D {
            width: shape[3] as u32,
            height: shape[2] as u32,
        };
        self.run_frame_in(gpu, rgba, width, height, out)
    }

    fn run_frame_in(
        &self,
        gpu: &Gpu,
        rgba: &[u8],
        width: u32,
        height: u32,
        out: vk::Extent2D,
    ) -> Result<Vec<u8>> {
        // Everything here lives for this call only: never kept, the guards destroy it on every
        // return (one_shot has waited for the GPU by then).
        let input_extent = vk::Extent2D { width, height };
        let usage = vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_DST;
        let input = Image::new(
            gpu,
            "run input",
            ImageDesc::new_2d(input_extent, FORMAT, usage),
        )?
        .guard(gpu);
        let usage = vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::TRANSFER_SRC;
        let output =
            Image::new(gpu, "run output", ImageDesc::new_2d(out, FORMAT, usage))?.guard(gpu);
        let staging = Buffer::with_data(
            gpu,
            "run input pixels",
            vk::BufferUsageFlags::TRANSFER_SRC,
            rgba,
        )?
        .guard(gpu);
        staging.flush_for_device(gpu)?;
        let readback = Buffer::readback_rgba8(gpu, "run output pixels", out)?.guard(gpu);
        let sampler = gpu::image::create_sampler(gpu, "run sampler", false, false, 0.0)?.guard(gpu);
        let (input, output) = (&*input, &*output);
        let frame = FrameImages {
            input: input.view,
            sampler: *sampler,
            output: output.view,
        };
        let device = &gpu.device;
        gpu.one_shot(|cmd| unsafe {
            let t = |image: &Image, from, to| Transition {
                image: image.raw,
                range: image.desc.range(),
                from,
                to,
            };
            barrier::transition(
                device,
                cmd,
                &[t(input, barrier::REUSE, barrier::TRANSFER_DST)],
            );
            let copy = gpu::image::whole_copy(input_extent);
            device.cmd_copy_buffer_to_image(
                cmd,
                staging.raw,
                input.raw,
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                &[copy],
            );
            barrier::transition(
                device,
                cmd,
                &[
                    t(input, barrier::TRANSFER_DST, barrier::SAMPLED),
                    t(output, barrier::REUSE, barrier::UPSCALE_WRITE),
                ],
            );
            self.record_frame(gpu, cmd, frame, None);
            gpu::image::record_capture(
                device,
                cmd,
                output.raw,
                out,
                barrier::UPSCALE_WRITE,
                readback.raw,
            );
        })?;
        readback.invalidate_for_host(gpu)?;
        let n = (out.width * out.height * 4) as usize;
        Ok(readback.mapped()[..n].to_vec())
    }
}
