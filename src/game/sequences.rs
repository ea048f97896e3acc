//! Camera *sequences*: held-out ones for measuring upscalers in motion (`quality --sequence`, the
//! sequence dataset's val split): the scripted fly-through, and seeded random walks that stay
//! inside the held-out cells of [`super::poses`], each starting at a held-out view of the same
//! seed; and the same kind of walk through the training region for the sequence dataset's train
//! split ([`training`]), where every other walk also stands still for a while (a temporal model
//! must learn to hold a still picture, as a player who stops sees one). The animation clock runs at [`FRAME_DT`] per frame, so the wheels spin
//! and the orbs float between frames as in the game.
//!
//! Pure and deterministic: the same (seed, count, frames) always gives the same cameras.

use std::f32::consts::{PI, TAU};

use glam::Vec2;
use rand::RngExt;
use rand_pcg::Pcg32;

use super::camera::{self, Camera};
use super::poses::{self, Pose, Split};
use super::world::World;

/// Seconds of animation per frame (the scripted path's rate).
pub const FRAME_DT: f32 = 1.0 / 60.0;
/// Walking speed range in m/s (the player walks at 5).
const SPEED: (f32, f32) = (1.0, 3.5);
/// Largest steady turn rate in rad/s (about 45°/s).
const TURN: f32 = 0.8;
/// Sway of the view around the steady turn: amplitude (rad) and angular frequency (rad/s).
const SWAY: (f32, f32) = (0.25, 2.5);
/// How far from props a walk stays, as the held-out poses do.
const PROP_CLEARANCE: f32 = 0.4;
/// Frames an odd-numbered training walk stands still (camera frozen, the animation going on):
/// long enough that a temporal model's history has nothing to refresh it.
const HOLD_FRAMES: (u64, u64) = (16, 48);

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Frames 0.. of [`camera::scripted`].
    Scripted,
    /// A random walk inside one held-out cell.
    Walk,
    /// A random walk through the training region (the sequence dataset's train split).
    TrainWalk,
}

/// One camera sequence: a pose per frame (animation time included) and the field of view.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sequence {
    pub name: String,
    pub kind: Kind,
    /// Vertical field of view in radians (the scripted path's 65°, the player's for walks).
    pub fov_y: f32,
    pub frames: Vec<Pose>,
}

impl Sequence {
    pub fn camera(&self, frame: usize) -> (Camera, f32) {
        let pose = &self.frames[frame];
        (pose.camera(self.fov_y), pose.time)
    }
}

/// `count` sequences of `frames` frames: the scripted path first, then walks 1.. (walk k starts
/// at held-out view k − 1 of `seed`, as `quality` and `dataset` draw them).
pub fn sequences(world: &World, seed: u64, count: u64, frames: u64) -> Vec<Sequence> {
    (0..count)
        .map(|k| match k {
            0 => scripted(frames),
            _ => walk(world, seed, k - 1, frames),
        })
        .collect()
}

fn pose_of(camera: &Camera, time: f32) -> Pose {
    Pose {
        pos: camera.pos.to_array(),
        yaw: camera.yaw,
        pitch: camera.pitch,
        time,
    }
}

/// Frames 0..`frames` of the scripted path.
pub fn scripted(frames: u64) -> Sequence {
    let fov_y = camera::scripted(0).0.fov_y;
    Sequence {
        name: "scripted".into(),
        kind: Kind::Scripted,
        fov_y,
        frames: (0..frames)
            .map(|n| {
                let (c, t) = camera::scripted(n);
                pose_of(&c, t)
            })
            .collect(),
    }
}

/// `count` walks of `frames` frames through the training region: walk k starts at training view
/// k of `seed` (`poses::pose`) and, like the held-out walks, turns around rather than step out
/// of its region, so no frame stands in or within `poses::MARGIN` of a held-out cell. Walks
/// 2, 4, … (odd k) stand still for 16 to 48 frames (`HOLD_FRAMES`) from a random frame on:
/// the camera keeps its pose while the animation clock goes on, then the walk goes on where it
/// stopped.
pub fn training(world: &World, seed: u64, count: u64, frames: u64) -> Vec<Sequence> {
    (0..count)
        .map(|k| walk_in(world, Split::Train, seed, k, frames))
        .collect()
}

/// A walk from held-out view `index` of `seed`: steady speed, a steady turn with a sway on top
/// and a slow nod of the pitch; a step that would leave the held-out region (or walk into a
/// prop) turns the walk around instead, so every frame stands where held-out views stand.
pub fn walk(world: &World, seed: u64, index: u64, frames: u64) -> Sequence {
    walk_in(world, Split::Val, seed, index, frames)
}

/// [`walk`] from view `index` of `split` for `seed`, staying in that split's region.
fn walk_in(world: &World, split: Split, seed: u64, index: u64, frames: u64) -> Sequence {
    let start = poses::pose(world, split, seed, index);
    // Separate streams per split, as the poses have: the held-out walks keep the stream they
    // always had (quality --sequence's figures stay comparable).
    let stream = match split {
        Split::Val => 0x5741_4c4b_0000_0003,
        Split::Train => 0x5457_414c_4b00_0004,
    };
    let mut rng = Pcg32::new(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15), stream);
    let speed = rng.random_range(SPEED.0..SPEED.1);
    let turn = rng.random_range(-TURN..TURN);
    let sway_phase = rng.random_range(0.0..TAU);
    let nod_phase = rng.random_range(0.0..TAU);
    // The direction of travel, relative to the view: ahead, sideways or backing away.
    let mut heading = rng.random_range(-PI..PI);
    // Drawn after the walk's own numbers, so a walk moves as it did before holds existed.
    let hold = (split == Split::Train && index % 2 == 1).then(|| {
        let len = rng.random_range(HOLD_FRAMES.0..=HOLD_FRAMES.1);
        // Within the sequence where it fits (a shorter sequence holds to its end).
        let at = rng.random_range(0..frames.saturating_sub(len).max(1));
        at..at + len
    });
    let mut ground = Vec2::new(start.pos[0], start.pos[2]);
    let mut out = Vec::with_capacity(frames as usize);
    // The walk's own clock: it stops while the camera holds still (the animation's does not).
    let mut walked = 0u64;
    for n in 0..frames {
        if hold.as_ref().is_some_and(|h| h.contains(&n) && n > h.start) {
            let last = *out
                .last()
                .expect("a hold starts after the first frame is pushed");
            out.push(Pose {
                time: start.time + n as f32 * FRAME_DT,
                ..last
            });
            continue;
        }
        let t = walked as f32 * FRAME_DT;
        walked += 1;
        let sway = SWAY.0 * ((SWAY.1 * t + sway_phase).sin() - sway_phase.sin());
        let yaw = (start.yaw + turn * t + sway).rem_euclid(TAU);
        let pitch = start.pitch + 0.08 * ((1.3 * t + nod_phase).sin() - nod_phase.sin());
        out.push(Pose {
            pos: [ground.x, start.pos[1], ground.y],
            yaw,
            pitch,
            time: start.time + n as f32 * FRAME_DT,
        });
        let dir = yaw + heading;
        let step = Vec2::new(dir.sin(), -dir.cos()) * speed * FRAME_DT;
        let next = ground + step;
        let inside =
            poses::region(next) == Some(split) && !world.near_obstacle(next, PROP_CLEARANCE);
        if inside {
            ground = next;
        } else {
            heading += PI;
        }
    }
    let (name, kind) = match split {
        Split::Val => (format!("walk {}", index + 1), Kind::Walk),
        Split::Train => (format!("train walk {}", index + 1), Kind::TrainWalk),
    };
    Sequence {
        name,
        kind,
        fov_y: world.camera.fov_y,
        frames: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_deterministic_and_start_with_the_scripted_path() {
        let w = World::new(7);
        let a = sequences(&w, 3, 4, 20);
        assert_eq!(a, sequences(&w, 3, 4, 20));
        assert_ne!(a[1], sequences(&w, 4, 4, 20)[1], "the seed must matter");
        assert_eq!(a.len(), 4);
        assert!(a.iter().all(|s| s.frames.len() == 20));
        for n in [0, 19] {
            let (c, t) = camera::scripted(n as u64);
            assert_eq!(a[0].camera(n), (c, t));
        }
    }

    #[test]
    fn walks_stay_in_held_out_cells_and_move_smoothly() {
        let w = World::new(7);
        for (k, s) in sequences(&w, 1, 9, 64).iter().enumerate().skip(1) {
            let start = poses::pose(&w, Split::Val, 1, k as u64 - 1);
            assert_eq!(s.frames[0], start, "{} starts at its held-out view", s.name);
            for pair in s.frames.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                let ground = Vec2::new(b.pos[0], b.pos[2]);
                assert_eq!(poses::region(ground), Some(Split::Val), "{}", s.name);
                let step = Vec2::new(b.pos[0] - a.pos[0], b.pos[2] - a.pos[2]).length();
                assert!(step <= SPEED.1 * FRAME_DT + 1e-5, "{}: {step} m", s.name);
                let turn = (b.yaw - a.yaw + PI).rem_euclid(TAU) - PI;
                assert!(turn.abs() < 0.05, "{}: {turn} rad in a frame", s.name);
                assert!((b.time - a.time - FRAME_DT).abs() < 1e-4);
            }
        }
    }

    /// No training frame stands in a held-out cell or within the margin of one, whatever the
    /// seed: the sequence dataset's split is as clean as the single-frame one.
    #[test]
    fn training_walks_never_enter_the_held_out_cells() {
        let w = World::new(7);
        for seed in [1, 2, 3] {
            let walks = training(&w, seed, 12, 240);
            assert_eq!(walks, training(&w, seed, 12, 240), "deterministic");
            for (k, s) in walks.iter().enumerate() {
                assert_eq!(s.kind, Kind::TrainWalk);
                assert_eq!(s.frames[0], poses::pose(&w, Split::Train, seed, k as u64));
                for pair in s.frames.windows(2) {
                    let ground = Vec2::new(pair[1].pos[0], pair[1].pos[2]);
                    assert_eq!(poses::region(ground), Some(Split::Train), "{}", s.name);
                    let step = Vec2::new(pair[1].pos[0], pair[1].pos[2])
                        - Vec2::new(pair[0].pos[0], pair[0].pos[2]);
                    assert!(step.length() <= SPEED.1 * FRAME_DT + 1e-5, "{}", s.name);
                }
            }
            // The walks do move (a walk stuck at its start would make a still sequence).
            assert!(walks.iter().all(|s| s.frames[0].pos != s.frames[239].pos));
            // Odd walks hold still for a while (16-48 frames), the others never do; the
            // animation clock goes on through a hold.
            for (k, s) in walks.iter().enumerate() {
                let still = s
                    .frames
                    .windows(2)
                    .filter(|p| {
                        (p[0].pos, p[0].yaw, p[0].pitch) == (p[1].pos, p[1].yaw, p[1].pitch)
                    })
                    .count() as u64;
                if k % 2 == 1 {
                    assert!(
                        (HOLD_FRAMES.0 - 1..HOLD_FRAMES.1).contains(&still),
                        "{}: {still} still steps",
                        s.name
                    );
                } else {
                    assert_eq!(still, 0, "{}", s.name);
                }
                for p in s.frames.windows(2) {
                    assert!(
                        (p[1].time - p[0].time - FRAME_DT).abs() < 1e-4,
                        "{}",
                        s.name
                    );
                }
            }
        }
    }

    /// A hold changes nothing before it, and after it the walk goes on from where it stopped
    /// (no jump: the walk's clock paused with it).
    #[test]
    fn a_hold_pauses_the_walk_without_a_jump() {
        let w = World::new(7);
        let held = walk_in(&w, Split::Train, 1, 1, 240);
        let moving = walk_in(&w, Split::Train, 1, 0, 240);
        assert_ne!(held.frames[0], moving.frames[0]);
        for pair in held.frames.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let turn = (b.yaw - a.yaw + PI).rem_euclid(TAU) - PI;
            assert!(turn.abs() < 0.05, "{turn} rad in a frame");
            let step = Vec2::new(b.pos[0] - a.pos[0], b.pos[2] - a.pos[2]).length();
            assert!(step <= SPEED.1 * FRAME_DT + 1e-5, "{step} m");
        }
    }
}
