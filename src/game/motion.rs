//! Motion vectors: where a surface point was on screen in the previous frame.
//!
//! Convention, used by the scene pass, its shaders and the tests alike: motion is in render
//! pixels, +x right, +y down the image, and is **current position − previous position**, so
//! `pixel_prev = pixel_cur − motion`. Both positions are unjittered: the jitter is the sampling
//! pattern, not movement, and an upscaler is given it separately.
//!
//! The previous frame is described by [`Previous`]: its (unjittered) view-projection and its
//! animation time, from which the world gives every draw's previous transform
//! ([`super::world::World::draws_at`]), so draw *i* of this frame and of the previous one are the
//! same object.

use glam::{Mat4, Vec2, Vec3, Vec4};

/// The previous frame, as the motion vectors need it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Previous {
    /// Unjittered view-projection.
    pub view_proj: Mat4,
    /// Animation time (`World::time`): the draws' previous transforms are the world's at it.
    pub time: f32,
}

/// One target's memory of the frame before, for the frame after.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct History {
    prev: Option<Previous>,
}

impl History {
    /// Records `current` and returns the previous frame to measure motion against: `current`
    /// itself (zero motion) on the first frame after a reset or when the animation clock went
    /// backwards (a restart, a jump to another point of the scripted path).
    pub fn advance(&mut self, current: Previous) -> Previous {
        match self.prev.replace(current) {
            Some(prev) if prev.time <= current.time => prev,
            _ => current,
        }
    }

    /// Forget the previous frame: the next one has zero motion (camera cut, restart).
    pub fn reset(&mut self) {
        self.prev = None;
    }
}

/// The pixel position (x right, y down, pixel centres at .5) of world point `p` through
/// `view_proj` on an image of `size` pixels; None behind the camera.
pub fn pixel(view_proj: Mat4, p: Vec3, size: Vec2) -> Option<Vec2> {
    let clip = view_proj * p.extend(1.0);
    (clip.w > 0.0).then(|| ndc_to_pixel(Vec2::new(clip.x, clip.y) / clip.w, size))
}

pub fn ndc_to_pixel(ndc: Vec2, size: Vec2) -> Vec2 {
    (ndc * 0.5 + 0.5) * size
}

/// The world point seen at `pixel` with depth-buffer value `depth` through `view_proj`.
pub fn unproject(view_proj: Mat4, pixel: Vec2, depth: f32, size: Vec2) -> Vec3 {
    let ndc = pixel / size * 2.0 - 1.0;
    let p = view_proj.inverse() * Vec4::new(ndc.x, ndc.y, depth, 1.0);
    p.truncate() / p.w
}

/// The motion of a point now at `now` (through `view_proj`) that was at `before` (through
/// `prev_view_proj`): current pixel − previous pixel. None when either is behind the camera.
pub fn motion(
    view_proj: Mat4,
    now: Vec3,
    prev_view_proj: Mat4,
    before: Vec3,
    size: Vec2,
) -> Option<Vec2> {
    Some(pixel(view_proj, now, size)? - pixel(prev_view_proj, before, size)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::camera::Camera;

    fn vp(x: f32) -> Mat4 {
        let c = Camera {
            pos: Vec3::new(x, 1.0, 5.0),
            yaw: 0.0,
            pitch: 0.0,
            fov_y: 1.0,
        };
        c.proj(2.0) * c.view()
    }

    #[test]
    fn history_gives_zero_motion_after_a_reset_or_a_jump_back() {
        let mut h = History::default();
        let a = Previous {
            view_proj: vp(0.0),
            time: 1.0,
        };
        let b = Previous {
            view_proj: vp(1.0),
            time: 1.1,
        };
        assert_eq!(h.advance(a), a, "first frame: itself");
        assert_eq!(h.advance(b), a);
        h.reset();
        assert_eq!(h.advance(a), a);
        assert_eq!(h.advance(b), a);
        let back = Previous { time: 0.0, ..a };
        assert_eq!(h.advance(back), back, "the clock went backwards");
    }

    #[test]
    fn a_camera_moving_right_moves_the_picture_left() {
        let size = Vec2::new(160.0, 80.0);
        let p = Vec3::new(0.0, 1.0, 0.0);
        let m = motion(vp(0.5), p, vp(0.0), p, size).unwrap();
        assert!(m.x < -1.0 && m.y.abs() < 1e-4, "{m}");
        let centre = pixel(vp(0.0), p, size).unwrap();
        assert!(centre.abs_diff_eq(size / 2.0, 1e-3), "{centre}");
        let back = unproject(
            vp(0.0),
            centre,
            {
                let c = vp(0.0) * p.extend(1.0);
                c.z / c.w
            },
            size,
        );
        assert!(back.abs_diff_eq(p, 1e-4), "{back}");
    }
}
