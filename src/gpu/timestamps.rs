//! GPU timestamp queries: named spans per frame slot, read back once the slot's fence has passed.

use ash::vk;

use super::{Gpu, Result};

/// Up to this many begin/end spans per frame (each uses two queries).
const MAX_SPANS: u32 = 256;

pub struct Timestamps {
    pool: vk::QueryPool,
    labels: Vec<&'static str>,
    enabled: bool,
    period_ns: f64,
    mask: u64,
    results: Vec<u64>,
}

/// A span opened by [`Timestamps::begin`]; close it with [`Timestamps::end`].
#[must_use]
pub struct Span(u32);

impl Timestamps {
    pub fn new(gpu: &Gpu, name: &str) -> Result<Self> {
        crate::fault::check("query pool", name)?;
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(MAX_SPANS * 2);
        let pool = unsafe { gpu.device.create_query_pool(&info, None)? };
        gpu.name(pool, name);
        // Queries start unavailable-but-unreset; a host reset makes the first frame's writes valid.
        unsafe { gpu.device.reset_query_pool(pool, 0, MAX_SPANS * 2) };
        let bits = gpu.info.timestamp_valid_bits;
        Ok(Self {
            pool,
            labels: Vec::with_capacity(MAX_SPANS as usize),
            enabled: bits > 0,
            period_ns: gpu.info.timestamp_period as f64,
            mask: if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            },
            results: vec![0; (MAX_SPANS * 2) as usize],
        })
    }

    /// # Safety
    /// `cmd` is recording; the slot's previous results were read (or dropped) and reset.
    pub unsafe fn begin(&mut self, gpu: &Gpu, cmd: vk::CommandBuffer, label: &'static str) -> Span {
        let index = self.labels.len() as u32;
        if !self.enabled || index >= MAX_SPANS {
            return Span(u32::MAX);
        }
        self.labels.push(label);
        gpu.device.cmd_write_timestamp2(
            cmd,
            vk::PipelineStageFlags2::ALL_COMMANDS,
            self.pool,
            index * 2,
        );
        Span(index)
    }

    /// # Safety
    /// As for [`Timestamps::begin`], same frame.
    pub unsafe fn end(&mut self, gpu: &Gpu, cmd: vk::CommandBuffer, span: Span) {
        if span.0 == u32::MAX {
            return;
        }
        gpu.device.cmd_write_timestamp2(
            cmd,
            vk::PipelineStageFlags2::ALL_COMMANDS,
            self.pool,
            span.0 * 2 + 1,
        );
    }

    /// Reads the spans of the frame that last used this slot (its fence has signalled), appends
    /// `(label, ms)` to `out`, and resets the queries for the next recording.
    pub fn collect(&mut self, gpu: &Gpu, out: &mut Vec<(&'static str, f64)>) {
        let used = self.labels.len() as u32 * 2;
        if used > 0 {
            let ok = unsafe {
                gpu.device.get_query_pool_results(
                    self.pool,
                    0,
                    &mut self.results[..used as usize],
                    vk::QueryResultFlags::TYPE_64,
                )
            };
            if ok.is_ok() {
                for (i, label) in self.labels.iter().enumerate() {
                    let start = self.results[i * 2] & self.mask;
                    let end = self.results[i * 2 + 1] & self.mask;
                    let ms = end.wrapping_sub(start) as f64 * self.period_ns / 1e6;
                    out.push((label, ms));
                }
            }
            unsafe { gpu.device.reset_query_pool(self.pool, 0, used) };
        }
        self.labels.clear();
    }

    pub fn destroy(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_query_pool(self.pool, None) };
    }
}
