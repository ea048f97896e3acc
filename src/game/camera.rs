//! First-person camera and the scripted fly-through used for reproducible
//! benchmark and comparison frames.

use glam::{Mat4, Vec3};

pub const NEAR: f32 = 0.05;
pub const FAR: f32 = 200.0;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub pos: Vec3,
    /// Radians; 0 looks along -Z, positive turns right (towards +X).
    pub yaw: f32,
    /// Radians; positive looks up.
    pub pitch: f32,
    /// Vertical field of view in radians.
    pub fov_y: f32,
}

impl Camera {
    pub fn forward(&self) -> Vec3 {
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.pitch.sin_cos();
        Vec3::new(sy * cp, sp, -cy * cp)
    }

    /// Horizontal unit vector to the camera's right, for strafing.
    pub fn right(&self) -> Vec3 {
        let (sy, cy) = self.yaw.sin_cos();
        Vec3::new(cy, 0.0, sy)
    }

    pub fn view(&self) -> Mat4 {
        Mat4::look_to_rh(self.pos, self.forward(), Vec3::Y)
    }

    /// Vulkan clip space: depth 0..1 and y pointing down, hence the flipped
    /// `[1][1]` relative to glam's GL-style-y projection.
    /// The flip mirrors screen-space winding, which is why pipelines must use
    /// `VK_FRONT_FACE_COUNTER_CLOCKWISE` for the CCW-outside meshes to cull right.
    pub fn proj(&self, aspect: f32) -> Mat4 {
        let mut p = Mat4::perspective_rh(self.fov_y, aspect, NEAR, FAR);
        p.y_axis.y = -p.y_axis.y;
        p
    }

    /// Yaw and pitch that make [`Camera::forward`] point along `dir`.
    pub fn angles_toward(dir: Vec3) -> (f32, f32) {
        let d = dir.normalize();
        (d.x.atan2(-d.z), d.y.clamp(-1.0, 1.0).asin())
    }
}

/// Deterministic fly-through: frame N always yields the same camera, so
/// captures from different runs and pipelines are comparable pixel for pixel.
///
/// A slow orbit whose radius and height breathe, looking roughly at the arena
/// centre with some sway, keeps text panels, the fence, the wheels and orbs in
/// view. Returns the camera and the animation time (`frame / 60` seconds).
pub fn scripted(frame: u64) -> (Camera, f32) {
    let t = frame as f32 / 60.0;
    let angle = 0.55 + t * 0.12;
    let radius = 15.0 + 4.0 * (t * 0.23).sin();
    let height = 2.2 + 0.9 * (t * 0.31 + 1.0).sin();
    let pos = Vec3::new(radius * angle.cos(), height, radius * angle.sin());
    let target = Vec3::new(2.5 * (t * 0.5).sin(), 1.2, 2.5 * (t * 0.4).cos());
    let (yaw, pitch) = Camera::angles_toward(target - pos);
    let camera = Camera {
        pos,
        yaw,
        pitch,
        fov_y: 65f32.to_radians(),
    };
    (camera, t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::Vec4;

    fn cam() -> Camera {
        Camera {
            pos: Vec3::new(1.0, 2.0, 3.0),
            yaw: 0.4,
            pitch: -0.2,
            fov_y: 1.0,
        }
    }

    #[test]
    fn forward_is_unit_and_matches_view() {
        let c = cam();
        assert!((c.forward().length() - 1.0).abs() < 1e-5);
        let ahead = c.view().transform_point3(c.pos + c.forward());
        assert!(ahead.abs_diff_eq(Vec3::NEG_Z, 1e-5), "{ahead}");
        let right = c.view().transform_vector3(c.right());
        assert!(right.abs_diff_eq(Vec3::X, 1e-5), "{right}");
    }

    #[test]
    fn yaw_zero_looks_down_negative_z() {
        let c = Camera {
            yaw: 0.0,
            pitch: 0.0,
            ..cam()
        };
        assert!(c.forward().abs_diff_eq(Vec3::NEG_Z, 1e-6));
    }

    #[test]
    fn proj_is_vulkan_clip_space() {
        let c = cam();
        let p = c.proj(16.0 / 9.0);
        let clip = |z: f32, y: f32| {
            let v = p * Vec4::new(0.0, y, z, 1.0);
            v.truncate() / v.w
        };
        assert!((clip(-NEAR, 0.0).z).abs() < 1e-5);
        assert!((clip(-FAR, 0.0).z - 1.0).abs() < 1e-4);
        assert!(
            clip(-5.0, 1.0).y < 0.0,
            "up in view space must be up on screen"
        );
    }

    #[test]
    fn angles_toward_round_trips() {
        let dir = Vec3::new(-3.0, 1.0, 2.0).normalize();
        let (yaw, pitch) = Camera::angles_toward(dir);
        let c = Camera {
            yaw,
            pitch,
            ..cam()
        };
        assert!(c.forward().abs_diff_eq(dir, 1e-5));
    }

    #[test]
    fn scripted_is_deterministic_and_inside_arena() {
        for frame in [0, 30, 60, 600, 5000] {
            let (a, ta) = scripted(frame);
            let (b, tb) = scripted(frame);
            assert_eq!((a, ta), (b, tb));
            assert_eq!(ta, frame as f32 / 60.0);
            assert!(a.pos.x.abs() < 29.0 && a.pos.z.abs() < 29.0 && a.pos.y > 0.5);
            let to_centre = (-a.pos).normalize();
            assert!(a.forward().dot(to_centre) > 0.8, "frame {frame} looks away");
        }
    }
}
