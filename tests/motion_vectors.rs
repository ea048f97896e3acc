//! The scene pass's motion vectors and kept depth on lavapipe with validation on, against the
//! analytic answer (`game::motion`'s convention: current − previous pixel, unjittered):
//! a known camera move over a still scene, with and without jitter and MSAA, and a spinning
//! wheel seen by a still camera. Each pixel's world point is rebuilt from the kept depth.

use ash::vk;
use glam::{Mat4, Vec2, Vec3, Vec4};
use gpu_allocator::MemoryLocation;

use upscale_demo::app::paths;
use upscale_demo::game::camera::Camera;
use upscale_demo::game::motion::{self, unproject};
use upscale_demo::game::world::{MeshId, World};
use upscale_demo::game::{jitter, textures};
use upscale_demo::gpu::image::record_capture_image;
use upscale_demo::gpu::instance::Validation;
use upscale_demo::gpu::{barrier, Buffer, Gpu};
use upscale_demo::render::scene::{ScenePass, SceneTargets};

const SIZE: vk::Extent2D = vk::Extent2D {
    width: 160,
    height: 90,
};
/// How far the GPU's motion may be from the analytic one, in render pixels, single-sample. The
/// error budget: RG16F rounding (about 0.004 px at 8 px of motion) and rebuilding the world
/// point from 32-bit depth.
const TOLERANCE_PX: f32 = 0.05;
/// With 4× MSAA the kept depth is sample 0's and the motion is the mean of the four samples'
/// (the pixel centre's, up to the motion's curvature): a pixel inside a surface is within this
/// of the analytic motion of the point sample 0 saw...
const TOLERANCE_MSAA_PX: f32 = 0.1;
/// ...except where a sub-pixel feature (a fence wire) covers some samples but not sample 0,
/// which the depth cannot tell: this share of the pixels on planes may be further off.
const MSAA_OUTLIERS: f64 = 0.05;
/// Where sample 0 of a 4× MSAA pixel lies (Vulkan's standard sample locations).
const SAMPLE_ZERO_4X: Vec2 = Vec2::new(0.375, 0.125);

struct Rig {
    gpu: Gpu,
    world: World,
    pass: ScenePass,
    targets: SceneTargets,
    motion: Buffer,
    depth: Buffer,
}

/// One frame's readback: motion (x, y) and depth per pixel, row-major.
struct Frame {
    motion: Vec<Vec2>,
    depth: Vec<f32>,
}

impl Frame {
    fn at(&self, x: u32, y: u32) -> (Vec2, f32) {
        let i = (y * SIZE.width + x) as usize;
        (self.motion[i], self.depth[i])
    }
}

impl Rig {
    fn new(msaa: u32) -> Self {
        let (gpu, _) = Gpu::new(Validation::from_env(), &[], "", None).unwrap();
        let world = World::new(7);
        let layers = textures::load_all(&paths::root().join("assets")).unwrap();
        let pass = ScenePass::new(&gpu, &world, &layers, msaa, 0.0).unwrap();
        let targets = pass.targets(&gpu, SIZE).unwrap();
        let bytes = SIZE.width as u64 * SIZE.height as u64 * 4;
        let readback = |name| {
            let usage = vk::BufferUsageFlags::TRANSFER_DST;
            Buffer::new(&gpu, name, bytes, usage, MemoryLocation::GpuToCpu).unwrap()
        };
        let (motion, depth) = (readback("motion readback"), readback("depth readback"));
        Self {
            gpu,
            world,
            pass,
            targets,
            motion,
            depth,
        }
    }

    /// Draws the world as it is now with `jitter` and reads back motion and depth.
    fn render(&mut self, jitter: Vec2) -> Frame {
        self.targets.set_jitter(jitter);
        let (gpu, pass, targets, world) = (&self.gpu, &mut self.pass, &self.targets, &self.world);
        let (motion, depth) = (self.motion.raw, self.depth.raw);
        gpu.one_shot(|cmd| unsafe {
            // SAFETY: one_shot records outside a rendering scope and waits for completion, so
            // the targets and readbacks are used by nothing else.
            pass.record(gpu, cmd, targets, world);
            let device = &gpu.device;
            record_capture_image(device, cmd, targets.motion(), barrier::SAMPLED, motion);
            record_capture_image(device, cmd, targets.depth(), barrier::SAMPLED, depth);
        })
        .unwrap();
        self.motion.invalidate_for_host(&self.gpu).unwrap();
        self.depth.invalidate_for_host(&self.gpu).unwrap();
        let halves: &[half::f16] = bytemuck::cast_slice(self.motion.mapped());
        let motion = halves
            .chunks(2)
            .map(|m| Vec2::new(m[0].to_f32(), m[1].to_f32()))
            .collect();
        let depth = bytemuck::cast_slice(self.depth.mapped()).to_vec();
        assert_eq!(
            self.gpu.validation_errors(),
            0,
            "validation errors: see the log"
        );
        Frame { motion, depth }
    }

    fn view_proj(&self, jitter: Vec2) -> Mat4 {
        let cam = self.world.camera;
        let proj = cam.proj(SIZE.width as f32 / SIZE.height as f32);
        jitter::jittered(proj, jitter, (SIZE.width, SIZE.height)) * cam.view()
    }

    fn destroy(self) {
        self.motion.destroy(&self.gpu);
        self.depth.destroy(&self.gpu);
        self.targets.destroy(&self.gpu);
        self.pass.destroy(&self.gpu);
    }
}

fn size() -> Vec2 {
    Vec2::new(SIZE.width as f32, SIZE.height as f32)
}

/// Pixel centres on a coarse grid.
fn grid() -> impl Iterator<Item = (u32, u32)> {
    (2..SIZE.height - 2)
        .step_by(4)
        .flat_map(|y| (2..SIZE.width - 2).step_by(4).map(move |x| (x, y)))
}

/// Whether (x, y) and its four neighbours lie on one plane (depth is affine in screen space on
/// a plane, so its second differences vanish): where an MSAA pixel's samples all see the same
/// surface.
fn inside_surface(frame: &Frame, x: u32, y: u32) -> bool {
    let d = |x, y| frame.at(x, y).1;
    let c = d(x, y);
    let flat = |a: f32, b: f32| (a + b - 2.0 * c).abs() < 0.005 * (1.0 - c) && a < 1.0 && b < 1.0;
    c < 1.0 && flat(d(x - 1, y), d(x + 1, y)) && flat(d(x, y - 1), d(x, y + 1))
}

/// The analytic motion at pixel (x, y) of a frame drawn through `now` (jittered as drawn),
/// whose unjittered matrix is `now_plain`, after a frame through `before` (unjittered), for a
/// still scene: the surface point is rebuilt from the kept depth, taken at `sample` within the
/// pixel (a direction for the sky).
fn camera_motion(
    [now, now_plain, before]: [Mat4; 3],
    (x, y): (u32, u32),
    sample: Vec2,
    depth: f32,
) -> Vec2 {
    let centre = Vec2::new(x as f32, y as f32) + sample;
    let project = |m: Mat4, p: Vec4| {
        let c = m * p;
        motion::ndc_to_pixel(Vec2::new(c.x, c.y) / c.w, size())
    };
    let point = if depth < 1.0 {
        unproject(now, centre, depth, size()).extend(1.0)
    } else {
        // The sky: a direction, which only the camera's rotation moves.
        let far = unproject(now, centre, 1.0, size());
        let near = unproject(now, centre, 0.0, size());
        (far - near).normalize().extend(0.0)
    };
    project(now_plain, point) - project(before, point)
}

struct CameraCase {
    msaa: u32,
    jitter: [Vec2; 2],
}

#[test]
fn a_known_camera_move_gives_the_analytic_motion() {
    let cases = [
        CameraCase {
            msaa: 1,
            jitter: [Vec2::ZERO; 2],
        },
        CameraCase {
            msaa: 1,
            jitter: [jitter::jitter(0, 32), jitter::jitter(1, 32)],
        },
        CameraCase {
            msaa: 4,
            jitter: [Vec2::ZERO, jitter::jitter(5, 32)],
        },
    ];
    for case in cases {
        let mut rig = Rig::new(case.msaa);
        let time = 3.0;
        let start = Camera {
            pos: Vec3::new(4.0, 2.0, 14.0),
            yaw: -0.3,
            pitch: -0.15,
            fov_y: 65f32.to_radians(),
        };
        // A step right and forward with a turn and a nod: every kind of camera motion.
        let moved = Camera {
            pos: start.pos + Vec3::new(0.25, 0.05, -0.2),
            yaw: start.yaw + 0.02,
            pitch: start.pitch - 0.01,
            ..start
        };
        rig.world.set_view(start, time);
        let first = rig.render(case.jitter[0]);
        let before = rig.view_proj(Vec2::ZERO);
        for (x, y) in grid() {
            let m = first.at(x, y).0;
            assert_eq!(
                m,
                Vec2::ZERO,
                "first frame: no history, no motion ({x}, {y})"
            );
        }
        rig.world.set_view(moved, time);
        let frame = rig.render(case.jitter[1]);
        let (now, now_plain) = (rig.view_proj(case.jitter[1]), rig.view_proj(Vec2::ZERO));
        let tolerance = if case.msaa == 1 {
            TOLERANCE_PX
        } else {
            TOLERANCE_MSAA_PX
        };
        let (mut checked, mut sky, mut outliers, mut worst) = (0, 0, 0, 0.0f32);
        for (x, y) in grid() {
            if case.msaa > 1 && !inside_surface(&frame, x, y) {
                continue;
            }
            let (got, depth) = frame.at(x, y);
            let sample = match case.msaa {
                1 => Vec2::splat(0.5),
                _ => SAMPLE_ZERO_4X,
            };
            let want = camera_motion([now, now_plain, before], (x, y), sample, depth);
            let err = (got - want).length();
            if case.msaa > 1 && err >= tolerance {
                outliers += 1;
                continue;
            }
            worst = worst.max(err);
            assert!(
                err < tolerance,
                "msaa {} jitter {:?}: pixel ({x}, {y}) depth {depth}: motion {got}, analytic {want}",
                case.msaa,
                case.jitter
            );
            assert!(
                want.length() > 1.0,
                "the move is visible everywhere: {want}"
            );
            checked += 1;
            sky += usize::from(depth == 1.0);
        }
        println!(
            "msaa {} jitter {:?}: {checked} pixels ({sky} sky), worst error {worst:.4} px, \
             {outliers} outliers",
            case.msaa, case.jitter
        );
        let share = outliers as f64 / (checked + outliers) as f64;
        assert!(
            share <= MSAA_OUTLIERS,
            "{outliers} of {} pixels off",
            checked + outliers
        );
        let sky_wanted = if case.msaa == 1 { 10 } else { 0 };
        assert!(
            checked > 200 && sky >= sky_wanted,
            "{checked} pixels, {sky} of sky"
        );
        rig.destroy();
    }
}

#[test]
fn a_spinning_wheel_gives_the_analytic_motion() {
    let mut rig = Rig::new(1);
    let (t0, dt) = (2.0, 0.1);
    let mut draws = Vec::new();
    rig.world.draws_at(t0 + dt, &mut draws);
    let wheel = draws.iter().position(|d| d.mesh == MeshId::Wheel).unwrap();
    let now_model = draws[wheel].model;
    let axle = now_model.z_axis.truncate().normalize();
    let centre = now_model.w_axis.truncate();
    // Facing the wheel along its axle from its outer side, close enough to fill the frame.
    let (yaw, pitch) = Camera::angles_toward(-axle);
    let camera = Camera {
        pos: centre + axle * 3.0,
        yaw,
        pitch,
        fov_y: 65f32.to_radians(),
    };
    rig.world.set_view(camera, t0);
    rig.render(Vec2::ZERO);
    rig.world.set_view(camera, t0 + dt);
    let frame = rig.render(Vec2::ZERO);
    rig.world.draws_at(t0, &mut draws);
    let before_model = draws[wheel].model;
    let view_proj = rig.view_proj(Vec2::ZERO);
    let (mut on_wheel, mut worst, mut fastest) = (0, 0.0f32, 0.0f32);
    for (x, y) in (0..SIZE.height).flat_map(|y| (0..SIZE.width).map(move |x| (x, y))) {
        let (got, depth) = frame.at(x, y);
        let centre_px = Vec2::new(x as f32 + 0.5, y as f32 + 0.5);
        if depth >= 1.0 {
            continue;
        }
        let point = unproject(view_proj, centre_px, depth, size());
        let local = now_model.inverse().transform_point3(point);
        let radius = local.truncate().length();
        // On the wheel itself: its disc (spokes and rim), not the stand or what lies behind.
        if local.z.abs() > 0.08 || !(0.3..1.45).contains(&radius) {
            continue;
        }
        let before = before_model.transform_point3(local);
        let want = motion::motion(view_proj, point, view_proj, before, size()).unwrap();
        let err = (got - want).length();
        worst = worst.max(err);
        fastest = fastest.max(want.length());
        assert!(
            err < TOLERANCE_PX,
            "pixel ({x}, {y}) on the wheel at radius {radius:.2}: motion {got}, analytic {want}"
        );
        on_wheel += 1;
    }
    println!("{on_wheel} wheel pixels, worst error {worst:.4} px, fastest {fastest:.2} px");
    assert!(on_wheel > 200, "only {on_wheel} pixels on the wheel");
    assert!(fastest > 2.0, "the wheel hardly moved: {fastest} px");
    rig.destroy();
}

#[test]
fn the_first_frame_and_a_reset_have_no_motion() {
    let mut rig = Rig::new(1);
    let (a, _) = upscale_demo::game::camera::scripted(10);
    let (b, _) = upscale_demo::game::camera::scripted(40);
    rig.world.set_view(a, 1.0);
    rig.render(Vec2::ZERO);
    rig.world.set_view(b, 1.5);
    let moving = rig.render(Vec2::ZERO);
    assert!(moving.motion.iter().any(|m| m.length() > 1.0));
    rig.targets.reset_history();
    rig.world.set_view(a, 2.0);
    let cut = rig.render(Vec2::ZERO);
    assert!(
        cut.motion.iter().all(|m| *m == Vec2::ZERO),
        "a reset starts with zero motion"
    );
    // The clock going backwards (a restart) is a reset too.
    rig.world.set_view(b, 0.5);
    let restart = rig.render(Vec2::ZERO);
    assert!(restart.motion.iter().all(|m| *m == Vec2::ZERO));
    rig.destroy();
}
