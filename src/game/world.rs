//! The arena game: collect every glowing orb as fast as possible.
//!
//! The layout is built once from a seed. Geometry is chosen to stress an
//! upscaler: 1-px texture detail, 2-3 cm fence wires that alias at low
//! resolution, edges at many angles (ramps, braces, spinning spokes) and
//! small bright emissive orbs.

use std::f32::consts::{PI, TAU};

use glam::{Mat4, Vec2, Vec3};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg32;

use super::camera::{self, Camera};
use super::mesh::{self, Mesh, WheelShape};
use super::textures::Layer;
use layout::{build_static, on_ring, yaw_facing, Obstacle, WHEEL_HUB_HEIGHT, WHEEL_RING};

pub const ARENA_HALF: f32 = 30.0;
const WALL_THICKNESS: f32 = 0.5;
/// How far the eye stays from the inner wall face, so the near plane never
/// clips into the wall.
const PLAYER_BOUND: f32 = ARENA_HALF - WALL_THICKNESS - 0.3;
pub const EYE_HEIGHT: f32 = 1.7;
const EYE_RANGE: (f32, f32) = (0.6, 6.0);
const WALK_SPEED: f32 = 5.0;
const SPRINT_SPEED: f32 = 10.0;
const CLIMB_SPEED: f32 = 3.0;
/// Degrees of turn per pixel of mouse motion, `game.mouse_sensitivity`'s default.
pub const DEFAULT_MOUSE_SENSITIVITY: f32 = 0.15;
const PITCH_LIMIT: f32 = 1.45;
/// Longest step simulated at once: a hitch (window drag, breakpoint) must not
/// teleport the player past orbs or through the bounds logic.
const MAX_DT: f32 = 0.1;

pub const ORB_COUNT: u32 = 12;
pub const COLLECT_RADIUS: f32 = 1.2;
const ORB_RADIUS: f32 = 0.35;
const ORB_HOVER: f32 = 1.0;
const ORB_BOB: f32 = 0.2;
/// Collection is measured from the body centre rather than the eye, so orbs
/// hovering at waist height are picked up by walking through them.
const BODY_BELOW_EYE: f32 = 0.7;
const START: Vec3 = Vec3::new(0.0, EYE_HEIGHT, 22.0);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MeshId {
    Static,
    Orb,
    Wheel,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Draw {
    pub mesh: MeshId,
    pub model: Mat4,
    /// 0 = lit normally; > 0 adds that much glow in the tint colour.
    pub emissive: f32,
}

#[derive(Default, Clone, Copy, Debug)]
pub struct Input {
    pub forward: bool,
    pub back: bool,
    pub left: bool,
    pub right: bool,
    pub up: bool,
    pub down: bool,
    pub sprint: bool,
    /// Pixels of mouse motion since the last update (+x right, +y down).
    pub look_delta: Vec2,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Orb {
    pub home: Vec3,
    pub phase: f32,
    pub collected: bool,
}

impl Orb {
    pub fn position(&self, time: f32) -> Vec3 {
        self.home + Vec3::Y * ORB_BOB * (2.0 * time + self.phase).sin()
    }

    fn pulse(&self, time: f32) -> f32 {
        (3.0 * time + self.phase).sin()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Wheel {
    centre: Vec3,
    /// Yaw that turns the wheel's axle (local +Z) to face away from the centre.
    facing: f32,
    speed: f32,
    phase: f32,
}

pub struct World {
    pub camera: Camera,
    /// Animation time in seconds; always runs.
    pub time: f32,
    pub score: u32,
    pub orb_count: u32,
    /// Run timer in seconds; stops when the last orb is collected.
    pub elapsed: f32,
    pub finished_at: Option<f32>,
    /// Degrees of turn per pixel of [`Input::look_delta`] (`game.mouse_sensitivity`): the only
    /// scale between mouse motion and the camera.
    pub mouse_sensitivity: f32,
    pub static_mesh: Mesh,
    pub orb_mesh: Mesh,
    pub wheel_mesh: Mesh,
    seed: u64,
    orbs: Vec<Orb>,
    wheels: Vec<Wheel>,
    /// Ground footprints of the solid props, kept so offline tools can keep cameras out of them.
    obstacles: Vec<Obstacle>,
}

impl World {
    pub fn new(seed: u64) -> Self {
        let mut rng = Pcg32::seed_from_u64(seed);
        let mut obstacles = Vec::new();
        let static_mesh = build_static(&mut rng, &mut obstacles);
        let wheels = place_wheels(&mut rng);
        let orbs = place_orbs(&mut rng, &obstacles);
        let shape = WheelShape {
            radius: 1.4,
            rim_width: 0.12,
            thickness: 0.06,
            spokes: 12,
            segments: 64,
        };
        Self {
            camera: start_camera(),
            time: 0.0,
            score: 0,
            orb_count: orbs.len() as u32,
            elapsed: 0.0,
            finished_at: None,
            mouse_sensitivity: DEFAULT_MOUSE_SENSITIVITY,
            static_mesh,
            orb_mesh: mesh::uv_sphere(ORB_RADIUS, 12, 24, Vec3::new(0.35, 0.9, 1.0), Layer::Plain),
            wheel_mesh: mesh::wheel(shape, Vec3::new(1.0, 0.55, 0.2), Layer::Stripes),
            seed,
            orbs,
            wheels,
            obstacles,
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn orbs(&self) -> &[Orb] {
        &self.orbs
    }

    pub fn update(&mut self, dt: f32, input: &Input) {
        let dt = dt.clamp(0.0, MAX_DT);
        self.time += dt;
        if self.finished_at.is_none() {
            self.elapsed += dt;
        }
        self.look(input.look_delta);
        self.walk(dt, input);
        self.collect();
    }

    fn look(&mut self, delta: Vec2) {
        let turn = delta * self.mouse_sensitivity.to_radians();
        let cam = &mut self.camera;
        // Wrapping keeps yaw small so precision does not degrade over long runs.
        cam.yaw = (cam.yaw + turn.x + PI).rem_euclid(TAU) - PI;
        cam.pitch = (cam.pitch - turn.y).clamp(-PITCH_LIMIT, PITCH_LIMIT);
    }

    fn walk(&mut self, dt: f32, input: &Input) {
        let axis = |pos: bool, neg: bool| f32::from(u8::from(pos)) - f32::from(u8::from(neg));
        let cam = &mut self.camera;
        let flat_forward = Vec3::new(cam.yaw.sin(), 0.0, -cam.yaw.cos());
        let wish = flat_forward * axis(input.forward, input.back)
            + cam.right() * axis(input.right, input.left);
        let speed = if input.sprint {
            SPRINT_SPEED
        } else {
            WALK_SPEED
        };
        cam.pos += wish.normalize_or_zero() * speed * dt;
        cam.pos.y += axis(input.up, input.down) * CLIMB_SPEED * dt;
        cam.pos.x = cam.pos.x.clamp(-PLAYER_BOUND, PLAYER_BOUND);
        cam.pos.z = cam.pos.z.clamp(-PLAYER_BOUND, PLAYER_BOUND);
        cam.pos.y = cam.pos.y.clamp(EYE_RANGE.0, EYE_RANGE.1);
    }

    fn collect(&mut self) {
        let body = self.camera.pos - Vec3::Y * BODY_BELOW_EYE;
        for orb in self.orbs.iter_mut().filter(|o| !o.collected) {
            if orb.position(self.time).distance(body) < COLLECT_RADIUS {
                orb.collected = true;
                self.score += 1;
            }
        }
        if self.score == self.orb_count && self.finished_at.is_none() {
            self.finished_at = Some(self.elapsed);
        }
    }

    pub fn restart(&mut self) {
        for orb in &mut self.orbs {
            orb.collected = false;
        }
        self.camera = start_camera();
        self.time = 0.0;
        self.score = 0;
        self.elapsed = 0.0;
        self.finished_at = None;
    }

    /// Puts the camera and animation clock on the scripted path. Game state
    /// (score, timer, collected orbs) is left untouched and nothing is
    /// collected, so captures do not depend on what the path flies through.
    pub fn set_scripted(&mut self, frame: u64) {
        let (camera, time) = camera::scripted(frame);
        self.camera = camera;
        self.time = time;
    }

    /// Puts the camera at `camera` and the animation clock at `time` (dataset and quality
    /// renders). Like [`World::set_scripted`] it leaves game state alone and collects nothing.
    pub fn set_view(&mut self, camera: Camera, time: f32) {
        self.camera = camera;
        self.time = time;
    }

    /// True when the ground point `p` (x, z) lies within `margin` of a solid prop: a camera
    /// there would look at back-face-culled insides, which no player normally sees.
    pub fn near_obstacle(&self, p: Vec2, margin: f32) -> bool {
        self.obstacles
            .iter()
            .any(|o| o.centre.distance(p) < o.radius + margin)
    }

    /// Clears `out` and fills it: static scene, then wheels, then uncollected
    /// orbs. Reusing `out` avoids a per-frame allocation once it has grown.
    pub fn draws(&self, out: &mut Vec<Draw>) {
        self.draws_at(self.time, out);
    }

    /// [`World::draws`] with the animation at `time` instead of now: the same draws in the same
    /// order (this frame's orbs), each where it was or will be at `time`. The scene pass takes
    /// the previous frame's transforms from it for the motion vectors.
    pub fn draws_at(&self, time: f32, out: &mut Vec<Draw>) {
        out.clear();
        out.push(Draw {
            mesh: MeshId::Static,
            model: Mat4::IDENTITY,
            emissive: 0.0,
        });
        out.extend(self.wheels.iter().map(|w| Draw {
            mesh: MeshId::Wheel,
            model: Mat4::from_translation(w.centre)
                * Mat4::from_rotation_y(w.facing)
                * Mat4::from_rotation_z(w.phase + w.speed * time),
            emissive: 0.0,
        }));
        out.extend(self.orbs.iter().filter(|o| !o.collected).map(|o| {
            let pulse = o.pulse(time);
            Draw {
                mesh: MeshId::Orb,
                model: Mat4::from_translation(o.position(time))
                    * Mat4::from_scale(Vec3::splat(1.0 + 0.08 * pulse)),
                emissive: 2.0 + pulse,
            }
        }));
    }

    /// Unit vector pointing toward the sun; fixed so frames stay reproducible.
    pub fn sun_dir(&self) -> Vec3 {
        Vec3::new(0.45, 0.8, 0.35).normalize()
    }
}

fn start_camera() -> Camera {
    Camera {
        pos: START,
        yaw: 0.0,
        pitch: -0.1,
        fov_y: 70f32.to_radians(),
    }
}

fn place_wheels(rng: &mut Pcg32) -> Vec<Wheel> {
    (0..4)
        .map(|k| {
            let dir = on_ring(1.0, PI / 4.0 + k as f32 * PI / 2.0);
            let sign = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            Wheel {
                centre: dir * WHEEL_RING + Vec3::Y * WHEEL_HUB_HEIGHT,
                facing: yaw_facing(dir),
                speed: sign * rng.random_range(0.8..2.5),
                phase: rng.random_range(0.0..TAU),
            }
        })
        .collect()
}

fn place_orbs(rng: &mut Pcg32, obstacles: &[Obstacle]) -> Vec<Orb> {
    let mut orbs: Vec<Orb> = Vec::new();
    let limit = ARENA_HALF - 4.0;
    let mut attempts = 0;
    while orbs.len() < ORB_COUNT as usize {
        attempts += 1;
        let p = Vec2::new(
            rng.random_range(-limit..limit),
            rng.random_range(-limit..limit),
        );
        let clear = obstacles
            .iter()
            .all(|o| o.centre.distance(p) > o.radius + ORB_RADIUS + 0.3)
            && orbs
                .iter()
                .all(|o| Vec2::new(o.home.x, o.home.z).distance(p) > 3.0)
            && p.distance(Vec2::new(START.x, START.z)) > 3.0;
        // The attempt cap only matters for a pathological layout; it trades
        // spacing for guaranteed termination.
        if clear || attempts > 10_000 {
            orbs.push(Orb {
                home: Vec3::new(p.x, ORB_HOVER, p.y),
                phase: rng.random_range(0.0..TAU),
                collected: false,
            });
        }
    }
    orbs
}

#[path = "world_layout.rs"]
mod layout;

#[cfg(test)]
#[path = "world_tests.rs"]
mod tests;
