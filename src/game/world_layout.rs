//! Static arena geometry for [`super::World`]: ground, walls, text panels,
//! pillars, fences, wheel stands and seeded ramps, merged into one mesh.

use std::f32::consts::{PI, TAU};

use glam::{Mat4, Quat, Vec2, Vec3};
use rand::RngExt;
use rand_pcg::Pcg32;

// World already imports these; reusing them keeps this file independent of
// where the game module sits in the crate.
use super::{mesh, Layer, Mesh, ARENA_HALF, WALL_THICKNESS};

/// Footprint on the ground that orbs must not spawn inside.
#[derive(Clone, Copy)]
pub(super) struct Obstacle {
    pub centre: Vec2,
    pub radius: f32,
}

pub(super) fn yaw_facing(dir: Vec3) -> f32 {
    dir.x.atan2(dir.z)
}

pub(super) fn on_ring(radius: f32, angle: f32) -> Vec3 {
    Vec3::new(radius * angle.cos(), 0.0, radius * angle.sin())
}

pub(super) const WHEEL_RING: f32 = 8.5;
pub(super) const WHEEL_HUB_HEIGHT: f32 = 1.9;
const GREY: Vec3 = Vec3::new(0.7, 0.72, 0.75);

/// Builds all static geometry into one mesh (one draw call) and records
/// footprints for orb placement.
pub(super) fn build_static(rng: &mut Pcg32, obstacles: &mut Vec<Obstacle>) -> Mesh {
    let mut m = Mesh::new();
    add_ground(&mut m);
    add_walls(&mut m);
    add_centre(&mut m, obstacles);
    add_billboards(&mut m, obstacles);
    add_pillars(&mut m, obstacles);
    add_fences(&mut m);
    add_wheel_stands(&mut m, obstacles);
    add_ramps(&mut m, rng, obstacles);
    m
}

fn place(m: &mut Mesh, part: &Mesh, pos: Vec3, yaw: f32) {
    m.append(
        part,
        Mat4::from_translation(pos) * Mat4::from_rotation_y(yaw),
    );
}

/// Thin square beam from `a` to `b`: fence wires and braces.
fn beam(m: &mut Mesh, a: Vec3, b: Vec3, thickness: f32) {
    let d = b - a;
    let part = mesh::cuboid(
        Vec3::new(d.length(), thickness, thickness),
        1.0,
        GREY,
        Layer::Plain,
    );
    let rot = Quat::from_rotation_arc(Vec3::X, d.normalize());
    m.append(&part, Mat4::from_rotation_translation(rot, (a + b) * 0.5));
}

/// Ground as a grid of tiles one texture repeat wide, so UVs stay continuous
/// across tiles while no triangle spans the whole arena (large triangles
/// crossing the near plane cost clipping work and depth precision).
fn add_ground(m: &mut Mesh) {
    const TILE: f32 = 4.0;
    let tile = mesh::plane(TILE, TILE, TILE, Vec3::ONE, Layer::Ground);
    let n = (2.0 * ARENA_HALF / TILE) as u32;
    for i in 0..n {
        for j in 0..n {
            let corner =
                Vec3::new(i as f32, 0.0, j as f32) * TILE - Vec3::new(ARENA_HALF, 0.0, ARENA_HALF);
            let centre = corner + Vec3::new(TILE, 0.0, TILE) * 0.5;
            m.append(&tile, Mat4::from_translation(centre));
        }
    }
}

fn add_walls(m: &mut Mesh) {
    let (len, h) = (2.0 * ARENA_HALF + 2.0 * WALL_THICKNESS, 4.0);
    let wall = mesh::cuboid(
        Vec3::new(len, h, WALL_THICKNESS),
        4.0,
        Vec3::ONE,
        Layer::Text,
    );
    let trim = mesh::cuboid(Vec3::new(len, 0.3, 0.8), 1.0, Vec3::ONE, Layer::Stripes);
    let off = ARENA_HALF + WALL_THICKNESS * 0.5;
    for k in 0..4 {
        let yaw = k as f32 * PI / 2.0;
        let out = Vec3::new(yaw.sin(), 0.0, yaw.cos()) * off;
        place(m, &wall, out + Vec3::Y * h * 0.5, yaw);
        place(m, &trim, out + Vec3::Y * (h + 0.15), yaw);
    }
}

/// Text kiosk in the middle with circuit tiles around it.
fn add_centre(m: &mut Mesh, obstacles: &mut Vec<Obstacle>) {
    let kiosk = mesh::cuboid(Vec3::new(2.4, 3.0, 2.4), 2.4, Vec3::ONE, Layer::Text);
    m.append(&kiosk, Mat4::from_translation(Vec3::Y * 1.5));
    let roof = mesh::cuboid(Vec3::new(3.0, 0.2, 3.0), 3.0, Vec3::ONE, Layer::Circuit);
    m.append(&roof, Mat4::from_translation(Vec3::Y * 3.1));
    obstacles.push(Obstacle {
        centre: Vec2::ZERO,
        radius: 2.2,
    });
    let tile = mesh::cuboid(Vec3::new(3.0, 0.04, 3.0), 3.0, Vec3::ONE, Layer::Circuit);
    for k in 0..4 {
        let a = k as f32 * PI / 2.0;
        place(m, &tile, on_ring(WHEEL_RING, a) + Vec3::Y * 0.02, 0.0);
        place(
            m,
            &tile,
            on_ring(3.6, a + PI / 4.0) + Vec3::Y * 0.02,
            PI / 4.0,
        );
    }
}

fn add_billboards(m: &mut Mesh, obstacles: &mut Vec<Obstacle>) {
    let panel = mesh::cuboid(Vec3::new(3.2, 2.0, 0.1), 3.2, Vec3::ONE, Layer::Text);
    let post = mesh::cuboid(Vec3::new(0.08, 1.0, 0.08), 1.0, GREY, Layer::Plain);
    for k in 0..6 {
        let dir = on_ring(1.0, PI / 6.0 + k as f32 * PI / 3.0);
        let (base, yaw) = (dir * 12.0, yaw_facing(dir));
        place(m, &panel, base + Vec3::Y * 2.0, yaw);
        let side = Vec3::new(dir.z, 0.0, -dir.x) * 1.3;
        place(m, &post, base + side + Vec3::Y * 0.5, yaw);
        place(m, &post, base - side + Vec3::Y * 0.5, yaw);
        obstacles.push(Obstacle {
            centre: Vec2::new(base.x, base.z),
            radius: 1.8,
        });
    }
}

fn add_pillars(m: &mut Mesh, obstacles: &mut Vec<Obstacle>) {
    let round = mesh::cylinder(0.45, 5.0, 24, Vec3::ONE, Layer::Stripes);
    let square = mesh::cuboid(Vec3::new(0.9, 5.0, 0.9), 1.5, Vec3::ONE, Layer::Bricks);
    for k in 0..8 {
        let pos = on_ring(20.0, PI / 8.0 + k as f32 * PI / 4.0);
        let part = if k % 2 == 0 { &round } else { &square };
        place(m, part, pos + Vec3::Y * 2.5, 0.3 * k as f32);
        obstacles.push(Obstacle {
            centre: Vec2::new(pos.x, pos.z),
            radius: 0.7,
        });
    }
}

/// Posts with four horizontal wires and alternating diagonal braces.
fn fence_run(m: &mut Mesh, a: Vec3, b: Vec3) {
    let post = mesh::cuboid(Vec3::new(0.06, 1.3, 0.06), 1.0, GREY, Layer::Plain);
    let spans = ((b - a).length() / 1.5).ceil().max(1.0) as u32;
    let at = |i: u32| a.lerp(b, i as f32 / spans as f32);
    for i in 0..=spans {
        place(m, &post, at(i) + Vec3::Y * 0.65, 0.0);
    }
    for h in [0.25, 0.55, 0.85, 1.15] {
        beam(m, a + Vec3::Y * h, b + Vec3::Y * h, 0.025);
    }
    for i in 0..spans {
        let (lo, hi) = (Vec3::Y * 0.1, Vec3::Y * 1.15);
        let (p, q) = if i % 2 == 0 { (lo, hi) } else { (hi, lo) };
        beam(m, at(i) + p, at(i + 1) + q, 0.02);
    }
}

fn add_fences(m: &mut Mesh) {
    let (h, gap) = (5.5, 1.2);
    for k in 0..4 {
        let rot = Quat::from_rotation_y(k as f32 * PI / 2.0);
        fence_run(
            m,
            rot * Vec3::new(-h, 0.0, h),
            rot * Vec3::new(-gap, 0.0, h),
        );
        fence_run(m, rot * Vec3::new(gap, 0.0, h), rot * Vec3::new(h, 0.0, h));
    }
    // A long oblique run puts wires at yet another screen angle.
    fence_run(m, Vec3::new(-26.0, 0.0, -6.0), Vec3::new(-10.0, 0.0, -25.0));
}

fn add_wheel_stands(m: &mut Mesh, obstacles: &mut Vec<Obstacle>) {
    let leg = mesh::cuboid(
        Vec3::new(0.1, WHEEL_HUB_HEIGHT, 0.1),
        1.0,
        GREY,
        Layer::Plain,
    );
    for k in 0..4 {
        let dir = on_ring(1.0, PI / 4.0 + k as f32 * PI / 2.0);
        let base = dir * WHEEL_RING;
        for side in [-0.2, 0.2] {
            place(
                m,
                &leg,
                base + dir * side + Vec3::Y * WHEEL_HUB_HEIGHT * 0.5,
                0.0,
            );
        }
        let hub = base + Vec3::Y * WHEEL_HUB_HEIGHT;
        beam(m, hub - dir * 0.25, hub + dir * 0.25, 0.05);
        obstacles.push(Obstacle {
            centre: Vec2::new(base.x, base.z),
            radius: 1.6,
        });
    }
}

/// Seeded slanted ramps and tipped boxes: edges at arbitrary screen angles.
fn add_ramps(m: &mut Mesh, rng: &mut Pcg32, obstacles: &mut Vec<Obstacle>) {
    const LAYERS: [Layer; 3] = [Layer::Stripes, Layer::Bricks, Layer::Circuit];
    for i in 0..10 {
        let radius = rng.random_range(14.0..25.0);
        let pos = on_ring(radius, rng.random_range(0.0..TAU));
        let layer = LAYERS[rng.random_range(0..LAYERS.len())];
        let yaw = rng.random_range(0.0..TAU);
        let (size, tilt, lift) = if i % 2 == 0 {
            let size = Vec3::new(rng.random_range(2.0..4.0), 0.4, rng.random_range(3.0..6.0));
            let tilt = rng.random_range(0.15..0.5f32);
            (size, Quat::from_rotation_x(tilt), 0.5 * size.z * tilt.sin())
        } else {
            let size = Vec3::splat(rng.random_range(0.8..1.8));
            let axis = Vec3::new(rng.random_range(-1.0..1.0), 0.0, 1.0).normalize();
            (
                size,
                Quat::from_axis_angle(axis, rng.random_range(0.3..0.8)),
                0.4 * size.x,
            )
        };
        let part = mesh::cuboid(size, 1.5, Vec3::ONE, layer);
        let rot = Quat::from_rotation_y(yaw) * tilt;
        m.append(
            &part,
            Mat4::from_rotation_translation(rot, pos + Vec3::Y * lift),
        );
        obstacles.push(Obstacle {
            centre: Vec2::new(pos.x, pos.z),
            radius: 0.5 * size.max_element() + 0.3,
        });
    }
}
