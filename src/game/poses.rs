//! Seeded random camera poses for the upscaler's training and evaluation frames.
//!
//! Train/validation split: **spatial**. The arena floor is cut into [`CELL`]-metre cells and a
//! fixed, seed-independent set of them (about one in eight, spread over the whole arena by
//! [`is_held_out_cell`]) is reserved for validation. Validation poses stand only inside held-out
//! cells; training poses stand only where every point within [`MARGIN`] is outside them. So no
//! training camera is ever within `2 × MARGIN` of a validation camera, whatever the seed or the
//! count, and the validation frames are genuinely new viewpoints rather than near-duplicates of
//! training frames one random draw apart (which a separate seed stream alone would not rule out).
//! Spreading the held-out cells over the arena (instead of holding out one corner) keeps every
//! kind of content — fence, billboards, wheels, ramps, orbs — in both splits. The two splits
//! also draw from separate RNG streams, so growing `--count` never shifts the other split.
//!
//! Pure and deterministic: the same (split, seed, index) always gives the same pose, which is how
//! `quality` re-renders exactly the dataset's validation frames.

use std::f32::consts::TAU;

use glam::{Vec2, Vec3};
use rand::RngExt;
use rand_pcg::Pcg32;

use super::camera::Camera;
use super::world::{World, ARENA_HALF};

/// Side of a split cell in metres: 12 × 12 cells over the 60 m arena.
pub const CELL: f32 = 5.0;
/// Clearance between training cameras and held-out cells, in metres.
pub const MARGIN: f32 = 0.75;
/// Eye height range in metres (crouching at the floor to above the ramps).
pub const EYE_HEIGHT: (f32, f32) = (0.8, 4.0);
/// Pitch range in degrees: mostly level or looking down, as a player does.
pub const PITCH_DEG: (f32, f32) = (-25.0, 10.0);
/// Animation time range in seconds (wheel angles, orb bobbing and pulsing).
pub const TIME_S: (f32, f32) = (0.0, 60.0);
/// How far inside the walls cameras stay (the near plane must not clip into them).
const WALL_CLEARANCE: f32 = 1.0;
/// How far from props cameras stay, so no frame is taken from inside a pillar.
const PROP_CLEARANCE: f32 = 0.4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Val,
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
        }
    }

    /// Separate streams: the two splits never share random draws.
    fn stream(self) -> u64 {
        match self {
            Split::Train => 0x7452_4149_4e00_0001,
            Split::Val => 0x5641_4c00_0000_0002,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Pose {
    pub pos: [f32; 3],
    pub yaw: f32,
    pub pitch: f32,
    /// Animation time in seconds.
    pub time: f32,
}

impl Pose {
    pub fn camera(&self, fov_y: f32) -> Camera {
        Camera {
            pos: Vec3::from_array(self.pos),
            yaw: self.yaw,
            pitch: self.pitch,
            fov_y,
        }
    }
}

/// Whether cell (i, j) belongs to the validation split: a fixed diagonal lattice that picks one
/// cell in eight and hits every row and column.
pub fn is_held_out_cell(i: i32, j: i32) -> bool {
    (i + 3 * j).rem_euclid(8) == 0
}

fn cell_of(p: Vec2) -> (i32, i32) {
    (
        ((p.x + ARENA_HALF) / CELL).floor() as i32,
        ((p.y + ARENA_HALF) / CELL).floor() as i32,
    )
}

/// The split a ground point (x, z) may be used by, if any: points within `MARGIN` of a
/// held-out cell boundary belong to neither.
pub fn region(p: Vec2) -> Option<Split> {
    let (i, j) = cell_of(p);
    if is_held_out_cell(i, j) {
        return Some(Split::Val);
    }
    let near_held_out = [-MARGIN, 0.0, MARGIN].iter().any(|&dx| {
        [-MARGIN, 0.0, MARGIN].iter().any(|&dz| {
            let (ci, cj) = cell_of(p + Vec2::new(dx, dz));
            is_held_out_cell(ci, cj)
        })
    });
    (!near_held_out).then_some(Split::Train)
}

/// The `index`-th pose of `split` for `seed`, rejection-sampled inside that split's region and
/// away from props. Each index has its own generator, so pose k does not depend on the count.
pub fn pose(world: &World, split: Split, seed: u64, index: u64) -> Pose {
    let mut rng = Pcg32::new(
        seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        split.stream(),
    );
    let limit = ARENA_HALF - WALL_CLEARANCE;
    let ground = loop {
        let p = Vec2::new(
            rng.random_range(-limit..limit),
            rng.random_range(-limit..limit),
        );
        if region(p) == Some(split) && !world.near_obstacle(p, PROP_CLEARANCE) {
            break p;
        }
    };
    Pose {
        pos: [
            ground.x,
            rng.random_range(EYE_HEIGHT.0..EYE_HEIGHT.1),
            ground.y,
        ],
        yaw: rng.random_range(0.0..TAU),
        pitch: rng.random_range(PITCH_DEG.0..PITCH_DEG.1).to_radians(),
        time: rng.random_range(TIME_S.0..TIME_S.1),
    }
}

/// Poses 0..count of `split`.
pub fn poses(world: &World, split: Split, seed: u64, count: u64) -> Vec<Pose> {
    (0..count).map(|k| pose(world, split, seed, k)).collect()
}

/// Validation frames for a training set of `train` frames: one in eight, at least 4.
pub fn val_count(train: u64) -> u64 {
    (train / 8).max(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> World {
        World::new(7)
    }

    #[test]
    fn poses_are_deterministic_and_in_range() {
        let w = world();
        for split in [Split::Train, Split::Val] {
            let a = poses(&w, split, 3, 50);
            assert_eq!(a, poses(&w, split, 3, 50));
            assert_ne!(a, poses(&w, split, 4, 50), "the seed must matter");
            for p in &a {
                assert!(p.pos[0].abs() < ARENA_HALF - 0.9 && p.pos[2].abs() < ARENA_HALF - 0.9);
                assert!((EYE_HEIGHT.0..EYE_HEIGHT.1).contains(&p.pos[1]));
                let deg = p.pitch.to_degrees();
                assert!((PITCH_DEG.0 - 1e-3..PITCH_DEG.1 + 1e-3).contains(&deg));
                assert!((0.0..TAU).contains(&p.yaw) && (TIME_S.0..TIME_S.1).contains(&p.time));
                assert_eq!(region(Vec2::new(p.pos[0], p.pos[2])), Some(split));
            }
        }
    }

    #[test]
    fn pose_k_does_not_depend_on_the_count() {
        let w = world();
        assert_eq!(
            poses(&w, Split::Train, 1, 10)[7],
            pose(&w, Split::Train, 1, 7)
        );
    }

    #[test]
    fn splits_are_spatially_disjoint_with_a_margin() {
        let w = world();
        let train = poses(&w, Split::Train, 1, 400);
        let val = poses(&w, Split::Val, 1, 50);
        for v in &val {
            for t in &train {
                let d = Vec2::new(v.pos[0] - t.pos[0], v.pos[2] - t.pos[2]).length();
                assert!(d > MARGIN, "train {t:?} and val {v:?} are {d} m apart");
            }
        }
    }

    #[test]
    fn held_out_cells_are_about_one_in_eight_and_cover_every_row() {
        let n = (2.0 * ARENA_HALF / CELL) as i32;
        let held: Vec<(i32, i32)> = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|&(i, j)| is_held_out_cell(i, j))
            .collect();
        assert!((14..=22).contains(&held.len()), "{} cells", held.len());
        for row in 0..n {
            assert!(held.iter().any(|c| c.0 == row) && held.iter().any(|c| c.1 == row));
        }
    }

    #[test]
    fn val_count_is_an_eighth_with_a_floor() {
        assert_eq!(val_count(16), 4);
        assert_eq!(val_count(1200), 150);
    }
}
