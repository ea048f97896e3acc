//! Pattern 1, CPU roundtrip ("separate contexts"): the low-resolution frame is copied into a
//! host-cached readback buffer, the host converts it to the model's NCHW float tensor, ONNX
//! Runtime runs on the CPU (or its own GPU context) writing into a tensor we own, the host
//! converts the result into a host-visible upload buffer, and the second submission copies it
//! into the output image.
//!
//! Frame split: `record` (submission A) copies image → readback buffer; the loop waits for A on
//! the host; `run_host` converts, infers, converts; `record_after` (submission B) copies upload
//! buffer → output image. vkQueueSubmit of B makes the host's writes to the upload buffer
//! visible to the device (the memory is host-coherent, or flushed here).

mod convert;

use std::time::Instant;

use ash::vk;
use gpu_allocator::MemoryLocation;

use super::model::OrtModel;
use super::{FrameIo, FrameSplit, HostTimes, MlSettings, Pattern, Schedule, Upscaler};
use crate::gpu::barrier::{self, Transition};
use crate::gpu::frame::FRAMES_IN_FLIGHT;
use crate::gpu::{self, Buffer, Destroy as _, Gpu, Image};

pub use convert::{nchw_to_rgba8, rgba8_to_nchw};

/// One frame slot's buffers: the other slot's frame may still be copying from or into its own.
struct SlotBuffers {
    /// Written by submission A's copy, read by the host step (HOST_CACHED: CPU reads are fast).
    readback: Buffer,
    /// Written by the host step, read by submission B's copy.
    upload: Buffer,
}

impl gpu::Destroy for SlotBuffers {
    fn destroy_with(self, gpu: &Gpu) {
        self.readback.destroy(gpu);
        self.upload.destroy(gpu);
    }
}

pub struct CpuRoundtrip {
    model: OrtModel,
    slots: Vec<SlotBuffers>,
    /// Model input and output, NCHW f32, allocated once; ORT reads and writes them in place.
    input: Vec<f32>,
    output: Vec<f32>,
    in_shape: [usize; 4],
    out_shape: [usize; 4],
    host_copy_bytes: u64,
}

impl CpuRoundtrip {
    pub fn new(gpu: &Gpu, ml: &MlSettings, input: &Image, output: &Image) -> anyhow::Result<Self> {
        let (model, info) = OrtModel::load(&ml.model, ml.provider, ml.intra_threads)?;
        let (ri, ro) = (input.extent(), output.extent());
        OrtModel::check_sizes(&info, (ri.width, ri.height), (ro.width, ro.height))?;
        let in_shape = [1, 3, ri.height as usize, ri.width as usize];
        let out_shape = [1, 3, ro.height as usize, ro.width as usize];
        let in_bytes = ri.width as u64 * ri.height as u64 * 4;
        let out_bytes = ro.width as u64 * ro.height as u64 * 4;
        // Guarded: a failed buffer releases the slots (and the slot's half) made before it.
        let slots = gpu::guard::try_collect(
            gpu,
            (0..FRAMES_IN_FLIGHT).map(|i| -> gpu::Result<SlotBuffers> {
                let readback = Buffer::new(
                    gpu,
                    &format!("roundtrip readback {i}"),
                    in_bytes,
                    vk::BufferUsageFlags::TRANSFER_DST,
                    MemoryLocation::GpuToCpu,
                )?
                .guard(gpu);
                let upload = Buffer::new(
                    gpu,
                    &format!("roundtrip upload {i}"),
                    out_bytes,
                    vk::BufferUsageFlags::TRANSFER_SRC,
                    MemoryLocation::CpuToGpu,
                )?;
                Ok(SlotBuffers {
                    readback: readback.keep(),
                    upload,
                })
            }),
        )?;
        Ok(Self {
            model,
            slots,
            input: vec![0.0; in_shape.iter().product()],
            output: vec![0.0; out_shape.iter().product()],
            in_shape,
            out_shape,
            host_copy_bytes: 0,
        })
    }
}

impl FrameSplit for CpuRoundtrip {
    fn schedule(&self) -> Schedule {
        Schedule::HostStep
    }

    fn run_host(&mut self, gpu: &Gpu, slot: usize, times: &mut HostTimes) -> anyhow::Result<()> {
        let buffers = &mut self.slots[slot];
        let t0 = Instant::now();
        buffers.readback.invalidate_for_host(gpu)?;
        rgba8_to_nchw(buffers.readback.mapped(), &mut self.input);
        let t1 = Instant::now();
        self.model.run(
            &mut self.input,
            self.in_shape,
            &mut self.output,
            self.out_shape,
        )?;
        let t2 = Instant::now();
        nchw_to_rgba8(&self.output, buffers.upload.mapped_mut());
        buffers.upload.flush_for_device(gpu)?;
        let t3 = Instant::now();
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        times.push(("to_tensor", ms(t0, t1)));
        times.push(("inference", ms(t1, t2)));
        times.push(("from_tensor", ms(t2, t3)));
        self.host_copy_bytes = buffers.readback.size + buffers.upload.size;
        Ok(())
    }
}

impl Upscaler for CpuRoundtrip {
    fn pattern(&self) -> Pattern {
        Pattern::CpuRoundtrip
    }

    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let device = &io.gpu.device;
        let span = io.timestamps.begin(io.gpu, io.cmd, "readback");
        let image = io.inputs.color;
        barrier::transition(
            device,
            io.cmd,
            &[Transition {
                image: image.raw,
                range: image.desc.range(),
                from: barrier::SAMPLED,
                to: barrier::TRANSFER_SRC,
            }],
        );
        let extent = image.extent();
        device.cmd_copy_image_to_buffer(
            io.cmd,
            image.raw,
            vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
            self.slots[io.slot].readback.raw,
            &[gpu::image::whole_copy(extent)],
        );
        barrier::transition(
            device,
            io.cmd,
            &[Transition {
                image: image.raw,
                range: image.desc.range(),
                from: barrier::TRANSFER_SRC,
                to: barrier::SAMPLED,
            }],
        );
        // The host reads the buffer after waiting for this submission's timeline value.
        barrier::memory(
            device,
            io.cmd,
            (
                vk::PipelineStageFlags2::COPY,
                vk::AccessFlags2::TRANSFER_WRITE,
            ),
            (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
        );
        io.timestamps.end(io.gpu, io.cmd, span);
        Ok(())
    }

    unsafe fn record_after(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let span = io.timestamps.begin(io.gpu, io.cmd, "upload");
        let device = &io.gpu.device;
        let output = io.output;
        let t = |from, to| Transition {
            image: output.raw,
            range: output.desc.range(),
            from,
            to,
        };
        barrier::transition(
            device,
            io.cmd,
            &[t(barrier::UPSCALE_WRITE, barrier::TRANSFER_DST)],
        );
        device.cmd_copy_buffer_to_image(
            io.cmd,
            self.slots[io.slot].upload.raw,
            output.raw,
            vk::ImageLayout::TRANSFER_DST_OPTIMAL,
            &[gpu::image::whole_copy(output.extent())],
        );
        barrier::transition(
            device,
            io.cmd,
            &[t(barrier::TRANSFER_DST, barrier::UPSCALE_WRITE)],
        );
        io.timestamps.end(io.gpu, io.cmd, span);
        Ok(())
    }

    fn host_copy_bytes(&self) -> u64 {
        self.host_copy_bytes
    }

    fn bus_bytes(&self) -> u64 {
        self.slots[0].readback.size + self.slots[0].upload.size
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        for slot in self.slots {
            slot.readback.destroy(gpu);
            slot.upload.destroy(gpu);
        }
    }
}
