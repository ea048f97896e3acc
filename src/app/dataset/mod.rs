//! `upscale-demo dataset`: low-resolution / supersampled PNG pairs of seeded random views of the
//! arena, for training the x2 upscaling models (tools/train/).
//!
//! Layout: `DIR/train/00000_lr.png` + `00000_hr.png`, …, `DIR/val/…` (poses from the held-out
//! region, see `game::poses` for why the split is spatial) and `DIR/dataset.json` (sizes, seed and
//! every pose, so a frame can be reproduced or inspected).
//!
//! `--sequences N --length K` makes the sequence dataset instead ([`sequences`]): camera
//! sequences of consecutive jittered frames with motion vectors, depth and the unjittered
//! reference, for temporal models.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use anyhow::Context as _;

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::ImageEncoder as _;

use super::config::Config;
use super::frames::{FrameSource, RawPair};
use crate::game::poses::{self, Pose, Split};

pub mod sequences;

pub struct DatasetArgs {
    pub out: PathBuf,
    /// Training pairs; the validation split gets `poses::val_count(count)`.
    pub count: u64,
    pub seed: u64,
    pub supersample: u32,
}

/// What every `dataset.json` starts with: how its images were made.
#[derive(serde::Serialize)]
pub struct DatasetHeader {
    pub seed: u64,
    pub render_size: [u32; 2],
    pub output_size: [u32; 2],
    /// Samples per pixel of the scene pass (`render.msaa`), for both images of a pair.
    pub msaa: u32,
    pub supersample: u32,
    pub device: String,
    pub validation_errors: u32,
}

impl DatasetHeader {
    /// The header of a dataset `source` rendered (read after the last render, for its
    /// validation errors).
    pub fn of(source: &FrameSource, seed: u64, supersample: u32) -> Self {
        Self {
            seed,
            render_size: [source.render.0, source.render.1],
            output_size: [source.output.0, source.output.1],
            msaa: source.msaa,
            supersample,
            device: source.gpu.info.name.clone(),
            validation_errors: source.gpu.validation_errors(),
        }
    }

    /// "WxH (msaa M) -> WxH", then what follows the sizes, for the line the commands print.
    pub fn sizes(&self, middle: &str) -> String {
        let ([rw, rh], [ow, oh]) = (self.render_size, self.output_size);
        format!("{rw}x{rh} (msaa {}){middle} -> {ow}x{oh}", self.msaa)
    }
}

#[derive(serde::Serialize)]
pub struct DatasetSummary {
    #[serde(flatten)]
    pub header: DatasetHeader,
    pub split: &'static str,
    pub train: Vec<Pose>,
    pub val: Vec<Pose>,
}

/// One finished render waiting to be downsampled and encoded by a writer thread.
struct Job {
    raw: RawPair,
    dir: PathBuf,
    index: u64,
}

pub fn run(config: &Config, args: &DatasetArgs) -> anyhow::Result<DatasetSummary> {
    anyhow::ensure!(args.count > 0, "--count must be at least 1");
    let mut source = FrameSource::new(config, args.supersample)?;
    let train = poses::poses(source.world(), Split::Train, args.seed, args.count);
    let val = poses::poses(
        source.world(),
        Split::Val,
        args.seed,
        poses::val_count(args.count),
    );
    with_writers(write_job, |tx| {
        render_views(
            &mut source,
            &args.out,
            [(Split::Val, &val), (Split::Train, &train)],
            tx,
        )
    })?;
    let summary = DatasetSummary {
        header: DatasetHeader::of(&source, args.seed, args.supersample),
        split: "spatial: val poses stand in held-out 5 m cells (1 in 8), train poses at least \
                0.75 m outside them (src/game/poses.rs)",
        train,
        val,
    };
    write_json(&args.out.join("dataset.json"), &summary)?;
    Ok(summary)
}

/// Renders every view of `splits` in order (val first: a run cut short by a time limit still
/// leaves a usable held-out split) and queues it for the writers. A closed queue means every
/// writer stopped on an error, which the caller reports.
fn render_views(
    source: &mut FrameSource,
    out: &Path,
    splits: [(Split, &Vec<Pose>); 2],
    tx: &mpsc::SyncSender<Job>,
) -> anyhow::Result<()> {
    let total: u64 = splits.iter().map(|(_, list)| list.len() as u64).sum();
    let progress_every = (total / 10).max(1);
    let mut done = 0u64;
    for (split, list) in splits {
        let dir = out.join(split.name());
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (index, pose) in list.iter().enumerate() {
            let raw = source.render_raw(pose)?;
            let job = Job {
                raw,
                dir: dir.clone(),
                index: index as u64,
            };
            if tx.send(job).is_err() {
                return Ok(());
            }
            done += 1;
            if done.is_multiple_of(progress_every) || done == total {
                tracing::info!("dataset: {done}/{total} views rendered");
            }
        }
    }
    Ok(())
}

/// Runs `render` on this thread while worker threads run `write` on every job it queues.
/// Rendering is one thread on the GPU; the box filter and the encoding dominate on the host, so
/// they run on the workers while the next view renders. The first error (of `render` or of a
/// writer) is returned once every thread stopped.
fn with_writers<J: Send>(
    write: fn(J) -> anyhow::Result<()>,
    render: impl FnOnce(&mpsc::SyncSender<J>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
    let (tx, rx) = mpsc::sync_channel::<J>(workers * 2);
    let rx = Arc::new(Mutex::new(rx));
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let rx = Arc::clone(&rx);
                scope.spawn(move || write_jobs(&rx, write))
            })
            .collect();
        // Only the writers hold the queue now: if they all stop on errors, `send` fails.
        drop(rx);
        let rendered = render(&tx);
        drop(tx);
        for handle in handles {
            handle.join().expect("dataset writer panicked")?;
        }
        rendered
    })
}

fn write_jobs<J>(
    rx: &Mutex<mpsc::Receiver<J>>,
    write: fn(J) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    loop {
        // The guard is a temporary of this statement: the lock is released before the work.
        let job = match rx.lock().expect("dataset queue poisoned").recv() {
            Ok(job) => job,
            Err(_) => return Ok(()),
        };
        write(job)?;
    }
}

fn write_job(job: Job) -> anyhow::Result<()> {
    let pair = job.raw.finish();
    let stem = format!("{:05}", job.index);
    for (suffix, img) in [("lr", &pair.lr), ("hr", &pair.hr)] {
        let path = job.dir.join(format!("{stem}_{suffix}.png"));
        save_training_png(&path, img)?;
    }
    Ok(())
}

/// Writes an opaque RGB PNG with the `Up` filter on every row: tools/train/ decodes it with
/// numpy alone (the GPU machine's Python has no imaging library), and `Up` unfilters as one
/// vectorised cumulative sum. Fast compression: these files are read once, by the trainer.
fn save_training_png(path: &Path, img: &image::RgbaImage) -> anyhow::Result<()> {
    let rgb: Vec<u8> = img
        .as_raw()
        .chunks_exact(4)
        .flat_map(|px| [px[0], px[1], px[2]])
        .collect();
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let encoder = PngEncoder::new_with_quality(
        std::io::BufWriter::new(file),
        CompressionType::Fast,
        FilterType::Up,
    );
    encoder
        .write_image(
            &rgb,
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgb8,
        )
        .with_context(|| format!("writing {}", path.display()))
}

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
