//! `upscale-demo dataset --sequences N --length K`: camera sequences of consecutive frames for
//! training temporal upscalers, each frame with what such an upscaler reads and its target.
//!
//! Sequences: N seeded walks through the training region (`game::sequences::training`), and for
//! the val split max(2, N/8) held-out sequences, the ones `quality --sequence` measures on (the
//! scripted path, then walks through the held-out cells). The animation clock runs at 60 frames
//! per second, so moving objects move between frames as in the game.
//!
//! Layout: `DIR/train/s0000/`, …, `DIR/val/s0000/`, … and `DIR/dataset.json`. Per frame `NNN`
//! (zero-padded to three digits, more when K > 1000):
//! - `fNNN_lr.png`: RGB8 at render size, exactly the frame the game's frame loop hands a temporal
//!   upscaler (`taau`): the renderer's Halton jitter, restarted at every sequence's first frame
//!   as the game restarts it after a history reset, and the upscaler-input mip bias.
//! - `fNNN_hr.png`: RGB8 at output size, the target: the same view *unjittered*, rendered at
//!   `--supersample ×` the output size and box-filtered in linear light (as `dataset` makes it).
//! - `fNNN_motion.npy`: float16 `[h, w, 2]` at render size, (x, y) in render pixels: the
//!   renderer's motion attachment, [`MOTION_CONVENTION`]. Zero on a sequence's first frame.
//! - `fNNN_depth.npy`: float32 `[h, w]` at render size, the depth-buffer value ([`DEPTH`]).
//!
//! `dataset.json` has the sizes, seed, MSAA, supersampling and device, the conventions, and per
//! sequence per frame the pose (camera position, yaw, pitch in radians, animation time in
//! seconds; the sequence's vertical field of view) and the jitter in render pixels.
//! Deterministic: the same seed, sizes and device give the same bytes.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use anyhow::Context as _;

use super::{save_training_png, with_writers, write_json, DatasetHeader};
use crate::app::config::Config;
use crate::app::frames::{FrameSource, TemporalFrame};
use crate::game::poses::{Pose, Split};
use crate::game::sequences::{self, Kind, Sequence, FRAME_DT};

/// What the motion vectors mean (also written into `dataset.json`).
pub const MOTION_CONVENTION: &str =
    "render pixels, +x right, +y down the image; current position - previous position, both \
     unjittered (pixel_prev = pixel_cur - motion). A jittered frame shows the point at unjittered \
     position p at p + jitter, so pixel x of frame t shows what frame t-1 shows at \
     x - motion[x] - jitter[t] + jitter[t-1]. With MSAA: the mean of the pixel's samples";
/// What the depth values mean (also written into `dataset.json`).
pub const DEPTH: &str = "depth-buffer value, 0 at the near plane to 1 at the far plane (the sky \
                         is 1); with MSAA the first sample's";
/// The jitter, as `dataset.json` describes it.
const JITTER: &str = "render pixels in [-0.5, 0.5), +x right, +y down: Halton(2,3) from index 1 \
                      (game::jitter), restarted at every sequence's first frame";

pub struct SequenceArgs {
    pub out: PathBuf,
    /// Training sequences; the validation split gets [`val_count`] of them.
    pub sequences: u64,
    /// Frames per sequence.
    pub length: u64,
    pub seed: u64,
    pub supersample: u32,
}

#[derive(serde::Serialize)]
pub struct SequenceSummary {
    #[serde(flatten)]
    pub header: DatasetHeader,
    pub length: u64,
    /// Animation seconds between consecutive frames.
    pub frame_dt: f32,
    /// Frames in one jitter period (8 × scale²).
    pub jitter_period: u32,
    pub jitter: &'static str,
    pub motion: &'static str,
    pub depth: &'static str,
    pub split: &'static str,
    pub train: Vec<SequenceEntry>,
    pub val: Vec<SequenceEntry>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct SequenceEntry {
    /// The sequence's folder, relative to the dataset's.
    pub dir: String,
    pub name: String,
    pub kind: Kind,
    /// Vertical field of view in radians.
    pub fov_y: f32,
    pub frames: Vec<FrameEntry>,
}

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct FrameEntry {
    #[serde(flatten)]
    pub pose: Pose,
    /// The low-resolution frame's sub-pixel offset, render pixels.
    pub jitter: [f32; 2],
}

/// Held-out sequences for `train` training sequences: one in eight, at least 2.
pub fn val_count(train: u64) -> u64 {
    (train / 8).max(2)
}

/// The file stem of frame `t` of a `length`-frame sequence: `f007`, or wider for long ones, so
/// the names sort in frame order.
pub fn frame_stem(t: u64, length: u64) -> String {
    let width = length.saturating_sub(1).to_string().len().max(3);
    format!("f{t:0width$}")
}

/// One rendered frame waiting to be downsampled and written by a writer thread.
struct Job {
    frame: TemporalFrame,
    render: (u32, u32),
    /// The frame's path without the `_lr.png` etc. suffix.
    stem: PathBuf,
}

pub fn run(config: &Config, args: &SequenceArgs) -> anyhow::Result<SequenceSummary> {
    anyhow::ensure!(args.sequences > 0, "--sequences must be at least 1");
    anyhow::ensure!(
        args.length >= 2,
        "--length {}: a sequence needs at least 2 frames (the first has no motion)",
        args.length
    );
    let mut source = FrameSource::temporal(config, args.supersample)?;
    let world = source.world();
    let train = sequences::training(world, args.seed, args.sequences, args.length);
    let val = sequences::sequences(world, args.seed, val_count(args.sequences), args.length);
    let mut entries = [Vec::new(), Vec::new()];
    with_writers(write_job, |tx| {
        // Val first: a run cut short by a time limit still leaves a usable held-out split.
        let splits = [(Split::Val, &val), (Split::Train, &train)];
        render_sequences(&mut source, args, splits, &mut entries, tx)
    })?;
    let [val_entries, train_entries] = entries;
    let scale = source.output.0 as f32 / source.render.0 as f32;
    finish(args, &source, scale, train_entries, val_entries)
}

fn finish(
    args: &SequenceArgs,
    source: &FrameSource,
    scale: f32,
    train: Vec<SequenceEntry>,
    val: Vec<SequenceEntry>,
) -> anyhow::Result<SequenceSummary> {
    let summary = SequenceSummary {
        header: DatasetHeader::of(source, args.seed, args.supersample),
        length: args.length,
        frame_dt: FRAME_DT,
        jitter_period: crate::game::jitter::sequence_len(scale),
        jitter: JITTER,
        motion: MOTION_CONVENTION,
        depth: DEPTH,
        split: "spatial: train walks stay at least 0.75 m outside the held-out 5 m cells (1 in \
                8); val is quality --sequence's held-out set: the scripted path, then walks \
                inside held-out cells (src/game/poses.rs, src/game/sequences.rs)",
        train,
        val,
    };
    write_json(&args.out.join("dataset.json"), &summary)?;
    Ok(summary)
}

/// Renders every frame of every sequence of `splits` in order and queues it for the writers,
/// filling `entries` (one list per split, in `splits`' order). A closed queue means every writer
/// stopped on an error, which the caller reports.
fn render_sequences(
    source: &mut FrameSource,
    args: &SequenceArgs,
    splits: [(Split, &Vec<Sequence>); 2],
    entries: &mut [Vec<SequenceEntry>; 2],
    tx: &mpsc::SyncSender<Job>,
) -> anyhow::Result<()> {
    let total: u64 = splits.iter().map(|(_, s)| s.len() as u64).sum::<u64>() * args.length;
    let progress_every = (total / 10).max(1);
    let mut done = 0u64;
    for ((split, list), entries) in splits.into_iter().zip(entries) {
        for (k, seq) in list.iter().enumerate() {
            let rel = format!("{}/s{k:04}", split.name());
            let dir = args.out.join(&rel);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let mut entry = SequenceEntry {
                dir: rel,
                name: seq.name.clone(),
                kind: seq.kind,
                fov_y: seq.fov_y,
                frames: Vec::with_capacity(seq.frames.len()),
            };
            source.start_sequence();
            for (t, pose) in seq.frames.iter().enumerate() {
                let (camera, time) = seq.camera(t);
                let frame = source.render_temporal(camera, time)?;
                entry.frames.push(FrameEntry {
                    pose: *pose,
                    jitter: frame.jitter.into(),
                });
                let stem = dir.join(frame_stem(t as u64, args.length));
                if tx
                    .send(Job {
                        frame,
                        render: source.render,
                        stem,
                    })
                    .is_err()
                {
                    return Ok(());
                }
                done += 1;
                if done.is_multiple_of(progress_every) || done == total {
                    tracing::info!("dataset: {done}/{total} sequence frames rendered");
                }
            }
            entries.push(entry);
        }
    }
    Ok(())
}

fn write_job(job: Job) -> anyhow::Result<()> {
    let (w, h) = (job.render.0 as u64, job.render.1 as u64);
    let path = |suffix: &str| {
        let mut name = job.stem.clone().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    };
    save_npy(&path("_motion.npy"), &[h, w, 2], job.frame.motion)?;
    save_npy(&path("_depth.npy"), &[h, w], job.frame.depth)?;
    let pair = job.frame.raw.finish();
    save_training_png(&path("_lr.png"), &pair.lr)?;
    save_training_png(&path("_hr.png"), &pair.hr)
}

/// Writes `data` (row-major, C order) as a `.npy` array of `shape`, numpy's own dtype for `T`.
fn save_npy<T: npyz::AutoSerialize>(
    path: &Path,
    shape: &[u64],
    data: Vec<T>,
) -> anyhow::Result<()> {
    use npyz::WriterBuilder as _;
    let write = || -> std::io::Result<()> {
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let mut out = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(shape)
            .writer(file)
            .begin_nd()?;
        out.extend(data)?;
        out.finish()
    };
    write().with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_sort_in_frame_order() {
        assert_eq!(frame_stem(7, 8), "f007");
        assert_eq!(frame_stem(999, 1000), "f999");
        assert_eq!(frame_stem(7, 1001), "f0007");
    }

    #[test]
    fn val_count_is_an_eighth_with_a_floor() {
        assert_eq!(val_count(1), 2);
        assert_eq!(val_count(64), 8);
    }
}
