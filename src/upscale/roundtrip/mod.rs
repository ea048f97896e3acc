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
//!
//! A temporal model (`upscale.kind = temporal`): submission A also copies the depth and the
//! motion vectors into readback buffers, and the host step builds the model's five inputs with
//! `model::temporal::fill_inputs` (the warp of its previous output, kept on the host) before
//! ONNX Runtime runs it.

mod convert;

use std::time::Instant;

use ash::vk;
use gpu_allocator::MemoryLocation;

use super::model::temporal::{self, HostFrame};
use super::model::{self as models, NamedTensor, OrtModel, OrtTemporal};
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

/// What runs the model: a single-frame upscaler, or a temporal model and what it keeps.
enum Runner {
    Image(Box<OrtModel>),
    Temporal(Box<TemporalHost>),
}

#[derive(Clone, Copy, Default)]
struct FrameMeta {
    jitter: [f32; 2],
    given: bool,
    applies: bool,
}

struct TemporalHost {
    model: OrtTemporal,
    /// Per slot: the depth (f32) and motion vectors (2 × f16) read back, 4 bytes a pixel each.
    depth: Vec<Buffer>,
    motion: Vec<Buffer>,
    /// Per slot: the frame's jitter, whether depth and motion vectors were given (else the
    /// model gets zeros, as in-stream's pre-process writes), and whether the history applies
    /// (given, and no reset).
    frames: [FrameMeta; FRAMES_IN_FLIGHT],
    /// Zero depth and motion for a frame without them.
    zeros: (Vec<f32>, Vec<half::f16>),
    /// The model's inputs, allocated once.
    inputs: Vec<NamedTensor>,
    /// The previous output as the history keeps it (`temporal::keep_history`: RGB, fp16
    /// values in f32, output size), when there is one.
    previous: Vec<f32>,
    has_previous: bool,
    size: (usize, usize),
}

pub struct CpuRoundtrip {
    model: Runner,
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
        let (ri, ro) = (input.extent(), output.extent());
        let (model, info) = match OrtModel::load(&ml.model, ml.provider, ml.intra_threads) {
            Err(models::ModelError::Temporal { .. }) => {
                return Self::new_temporal(gpu, ml, input, output)
            }
            loaded => loaded?,
        };
        OrtModel::check_sizes(&info, (ri.width, ri.height), (ro.width, ro.height))?;
        Self::with_runner(gpu, Runner::Image(Box::new(model)), input, output)
    }

    fn new_temporal(
        gpu: &Gpu,
        ml: &MlSettings,
        input: &Image,
        output: &Image,
    ) -> anyhow::Result<Self> {
        let (ri, ro) = (input.extent(), output.extent());
        let model = OrtTemporal::load(&ml.model, ml.provider, ml.intra_threads)?;
        check_temporal_sizes(&ml.model, (ri.width, ri.height), (ro.width, ro.height))?;
        let bytes = u64::from(ri.width) * u64::from(ri.height) * 4;
        let readback = |what: &str, i: usize| {
            Buffer::new(
                gpu,
                &format!("roundtrip {what} readback {i}"),
                bytes,
                vk::BufferUsageFlags::TRANSFER_DST,
                MemoryLocation::GpuToCpu,
            )
        };
        let depth =
            gpu::guard::try_collect(gpu, (0..FRAMES_IN_FLIGHT).map(|i| readback("depth", i)))?
                .guard(gpu);
        let motion =
            gpu::guard::try_collect(gpu, (0..FRAMES_IN_FLIGHT).map(|i| readback("motion", i)))?
                .guard(gpu);
        let size = (ri.width as usize, ri.height as usize);
        let host = TemporalHost {
            model,
            depth: depth.keep(),
            motion: motion.keep(),
            frames: [FrameMeta::default(); FRAMES_IN_FLIGHT],
            zeros: (
                vec![0.0; size.0 * size.1],
                vec![half::f16::ZERO; 2 * size.0 * size.1],
            ),
            inputs: temporal::empty_inputs(size.0, size.1),
            previous: vec![0.0; (ro.width * ro.height * 3) as usize],
            has_previous: false,
            size,
        };
        Self::with_runner(gpu, Runner::Temporal(Box::new(host)), input, output)
    }

    fn with_runner(
        gpu: &Gpu,
        model: Runner,
        input: &Image,
        output: &Image,
    ) -> anyhow::Result<Self> {
        let (ri, ro) = (input.extent(), output.extent());
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

impl CpuRoundtrip {
    /// Bytes a frame of a temporal model also reads back: its depth and motion vectors.
    fn temporal_bytes(&self) -> u64 {
        match &self.model {
            Runner::Temporal(t) => t.depth[0].size + t.motion[0].size,
            Runner::Image(_) => 0,
        }
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
        let (t1, t2) = match &mut self.model {
            Runner::Image(model) => {
                rgba8_to_nchw(buffers.readback.mapped(), &mut self.input);
                let t1 = Instant::now();
                model.run(
                    &mut self.input,
                    self.in_shape,
                    &mut self.output,
                    self.out_shape,
                )?;
                let t2 = Instant::now();
                nchw_to_rgba8(&self.output, buffers.upload.mapped_mut());
                (t1, t2)
            }
            Runner::Temporal(t) => {
                t.depth[slot].invalidate_for_host(gpu)?;
                t.motion[slot].invalidate_for_host(gpu)?;
                let meta = t.frames[slot];
                let n = t.size.0 * t.size.1;
                let (depth, motion): (&[f32], &[half::f16]) = if meta.given {
                    (
                        &bytemuck::cast_slice(t.depth[slot].mapped())[..n],
                        &bytemuck::cast_slice(t.motion[slot].mapped())[..2 * n],
                    )
                } else {
                    (&t.zeros.0, &t.zeros.1)
                };
                let frame = HostFrame {
                    width: t.size.0,
                    height: t.size.1,
                    color: buffers.readback.mapped(),
                    depth,
                    motion,
                    jitter: meta.jitter,
                };
                let previous = (meta.applies && t.has_previous).then_some(t.previous.as_slice());
                temporal::fill_inputs(&frame, previous, t.model.history(), &mut t.inputs);
                let t1 = Instant::now();
                t.model.run(&t.inputs, &mut self.output)?;
                let t2 = Instant::now();
                // Kept as the next frame's history; the image goes to the upload.
                temporal::keep_history(&self.output, &mut t.previous);
                t.has_previous = true;
                nchw_to_rgba8(&self.output, buffers.upload.mapped_mut());
                (t1, t2)
            }
        };
        buffers.upload.flush_for_device(gpu)?;
        let t3 = Instant::now();
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        times.push(("to_tensor", ms(t0, t1)));
        times.push(("inference", ms(t1, t2)));
        times.push(("from_tensor", ms(t2, t3)));
        self.host_copy_bytes = buffers.readback.size + buffers.upload.size + self.temporal_bytes();
        Ok(())
    }
}

impl Upscaler for CpuRoundtrip {
    fn pattern(&self) -> Pattern {
        Pattern::CpuRoundtrip
    }

    fn temporal(&self) -> bool {
        matches!(self.model, Runner::Temporal(_))
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
        if let Runner::Temporal(t) = &mut self.model {
            let inputs = io.inputs;
            let given = inputs.depth.zip(inputs.motion);
            t.frames[io.slot] = FrameMeta {
                jitter: inputs.jitter,
                given: given.is_some(),
                applies: !inputs.reset && given.is_some(),
            };
            if let Some((depth, motion)) = given {
                copy_to_buffer(device, io.cmd, depth, t.depth[io.slot].raw);
                copy_to_buffer(device, io.cmd, motion, t.motion[io.slot].raw);
            }
        }
        // The host reads the buffers after waiting for this submission's timeline value.
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
        self.slots[0].readback.size + self.slots[0].upload.size + self.temporal_bytes()
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        if let Runner::Temporal(t) = self.model {
            for b in t.depth.into_iter().chain(t.motion) {
                b.destroy(gpu);
            }
        }
        for slot in self.slots {
            slot.readback.destroy(gpu);
            slot.upload.destroy(gpu);
        }
    }
}

/// Copies a sampled render-size image (colour or depth aspect, 4 bytes a pixel) into `buffer`
/// and gives it back to the samplers.
///
/// # Safety
/// `cmd` is recording outside a render pass; `image` is in `barrier::SAMPLED`.
unsafe fn copy_to_buffer(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    image: &Image,
    buffer: vk::Buffer,
) {
    let t = |from, to| Transition {
        image: image.raw,
        range: image.desc.range(),
        from,
        to,
    };
    barrier::transition(device, cmd, &[t(barrier::SAMPLED, barrier::TRANSFER_SRC)]);
    let mut region = gpu::image::whole_copy(image.extent());
    region.image_subresource.aspect_mask = image.desc.range().aspect_mask;
    device.cmd_copy_image_to_buffer(
        cmd,
        image.raw,
        vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
        buffer,
        &[region],
    );
    barrier::transition(device, cmd, &[t(barrier::TRANSFER_SRC, barrier::SAMPLED)]);
}

/// A temporal model upscales x2: the output must be twice the render size.
pub(super) fn check_temporal_sizes(
    path: &std::path::Path,
    render: (u32, u32),
    output: (u32, u32),
) -> Result<(), models::ModelError> {
    if output == (2 * render.0, 2 * render.1) {
        return Ok(());
    }
    Err(models::ModelError::SizeMismatch {
        model: path.to_path_buf(),
        scale: 2,
        render,
        output,
    })
}
