//! Triangle meshes built procedurally on the CPU.
//!
//! Conventions: right-handed, +Y up, triangle lists whose front faces are
//! counter-clockwise when seen from outside. UVs are in world units divided by
//! a per-builder repeat length so that textures keep a constant texel density
//! across differently sized objects and tile seamlessly (sampler in repeat mode).

use glam::{Mat3, Mat4, Vec2, Vec3};
use std::f32::consts::TAU;

use super::textures::Layer;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Vertex {
    pub pos: [f32; 3],
    pub normal: [f32; 3],
    pub uv: [f32; 2],
    /// rgb: linear tint; w: texture array layer (a [`Layer`] as `f32`), packed
    /// here so the shader needs no extra per-draw state to pick the texture.
    pub color: [f32; 4],
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub vertices: Vec<Vertex>,
    pub indices: Vec<u32>,
}

/// Tint plus layer, carried together because every vertex needs both.
#[derive(Clone, Copy)]
struct Paint([f32; 4]);

impl Paint {
    fn new(color: Vec3, layer: Layer) -> Self {
        Self([color.x, color.y, color.z, layer as u32 as f32])
    }
}

impl Mesh {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `other` transformed by `transform`.
    ///
    /// Normals go through the inverse-transpose so non-uniform scales (thin
    /// wires, slabs) keep them perpendicular to the surface; a mirroring
    /// transform flips winding, so triangles are reversed to stay front-facing.
    pub fn append(&mut self, other: &Mesh, transform: Mat4) {
        let normal_matrix = Mat3::from_mat4(transform).inverse().transpose();
        let mirrored = transform.determinant() < 0.0;
        let base = u32::try_from(self.vertices.len()).expect("mesh exceeds u32 indices");
        self.vertices.extend(other.vertices.iter().map(|v| Vertex {
            pos: transform.transform_point3(Vec3::from(v.pos)).into(),
            normal: (normal_matrix * Vec3::from(v.normal)).normalize().into(),
            ..*v
        }));
        for tri in other.indices.chunks_exact(3) {
            let [a, b, c] = [tri[0] + base, tri[1] + base, tri[2] + base];
            if mirrored {
                self.indices.extend_from_slice(&[a, c, b]);
            } else {
                self.indices.extend_from_slice(&[a, b, c]);
            }
        }
    }

    fn next_index(&self) -> u32 {
        u32::try_from(self.vertices.len()).expect("mesh exceeds u32 indices")
    }

    fn push_vertex(&mut self, pos: Vec3, normal: Vec3, uv: Vec2, paint: Paint) {
        self.vertices.push(Vertex {
            pos: pos.into(),
            normal: normal.into(),
            uv: uv.into(),
            color: paint.0,
        });
    }

    /// Quad with corners listed counter-clockwise as seen from the front.
    fn push_quad(&mut self, corners: [Vec3; 4], normals: [Vec3; 4], uvs: [Vec2; 4], paint: Paint) {
        let i = self.next_index();
        for k in 0..4 {
            self.push_vertex(corners[k], normals[k], uvs[k], paint);
        }
        self.indices
            .extend_from_slice(&[i, i + 1, i + 2, i, i + 2, i + 3]);
    }

    /// Flat rectangle spanned by `right` and `up` from `origin`; the front is
    /// `right × up`. Texture v runs downwards so images appear upright when
    /// `up` points up, which keeps glyphs on text panels readable.
    fn push_face(&mut self, origin: Vec3, right: Vec3, up: Vec3, uv_scale: f32, paint: Paint) {
        let n = right.cross(up).normalize();
        let (w, h) = (right.length() / uv_scale, up.length() / uv_scale);
        self.push_quad(
            [origin, origin + right, origin + right + up, origin + up],
            [n; 4],
            [
                Vec2::new(0.0, h),
                Vec2::new(w, h),
                Vec2::new(w, 0.0),
                Vec2::ZERO,
            ],
            paint,
        );
    }
}

/// Axis-aligned box centred on the origin; `uv_scale` is the world length of
/// one texture repeat.
pub fn cuboid(size: Vec3, uv_scale: f32, color: Vec3, layer: Layer) -> Mesh {
    let paint = Paint::new(color, layer);
    let h = size * 0.5;
    let (x, y, z) = (Vec3::X * size.x, Vec3::Y * size.y, Vec3::Z * size.z);
    let mut m = Mesh::new();
    m.push_face(Vec3::new(-h.x, -h.y, h.z), x, y, uv_scale, paint);
    m.push_face(Vec3::new(h.x, -h.y, -h.z), -x, y, uv_scale, paint);
    m.push_face(Vec3::new(h.x, -h.y, h.z), -z, y, uv_scale, paint);
    m.push_face(Vec3::new(-h.x, -h.y, -h.z), z, y, uv_scale, paint);
    m.push_face(Vec3::new(-h.x, h.y, h.z), x, -z, uv_scale, paint);
    m.push_face(Vec3::new(-h.x, -h.y, -h.z), x, z, uv_scale, paint);
    m
}

/// Horizontal rectangle at y = 0 facing +Y, centred on the origin; `uv_scale`
/// is the world length of one texture repeat.
pub fn plane(size_x: f32, size_z: f32, uv_scale: f32, color: Vec3, layer: Layer) -> Mesh {
    let mut m = Mesh::new();
    let origin = Vec3::new(-size_x * 0.5, 0.0, size_z * 0.5);
    m.push_face(
        origin,
        Vec3::X * size_x,
        Vec3::NEG_Z * size_z,
        uv_scale,
        Paint::new(color, layer),
    );
    m
}

/// Point on a circle in the XZ plane; angle runs clockwise seen from above so
/// that increasing angle paired with +Y gives outward-facing quads.
fn ring_xz(angle: f32) -> Vec3 {
    Vec3::new(angle.cos(), 0.0, -angle.sin())
}

/// Capped cylinder around the Y axis, centred on the origin. UVs are in metres
/// (one repeat per metre), with the wrap rounded to whole repeats so the seam
/// does not show.
pub fn cylinder(radius: f32, height: f32, segments: u32, color: Vec3, layer: Layer) -> Mesh {
    let paint = Paint::new(color, layer);
    let segments = segments.max(3);
    let hy = height * 0.5;
    let u_wrap = (TAU * radius).round().max(1.0);
    let mut m = Mesh::new();
    for i in 0..segments {
        let (t0, t1) = (i as f32 / segments as f32, (i + 1) as f32 / segments as f32);
        let (d0, d1) = (ring_xz(t0 * TAU), ring_xz(t1 * TAU));
        let (u0, u1) = (t0 * u_wrap, t1 * u_wrap);
        m.push_quad(
            [
                d0 * radius - Vec3::Y * hy,
                d1 * radius - Vec3::Y * hy,
                d1 * radius + Vec3::Y * hy,
                d0 * radius + Vec3::Y * hy,
            ],
            [d0, d1, d1, d0],
            [
                Vec2::new(u0, height),
                Vec2::new(u1, height),
                Vec2::new(u1, 0.0),
                Vec2::new(u0, 0.0),
            ],
            paint,
        );
    }
    push_cap(&mut m, radius, hy, segments, paint, true);
    push_cap(&mut m, radius, -hy, segments, paint, false);
    m
}

fn push_cap(m: &mut Mesh, radius: f32, y: f32, segments: u32, paint: Paint, up: bool) {
    let n = if up { Vec3::Y } else { Vec3::NEG_Y };
    let centre = m.next_index();
    let planar_uv = |p: Vec3| Vec2::new(p.x, p.z);
    m.push_vertex(Vec3::Y * y, n, Vec2::ZERO, paint);
    for i in 0..=segments {
        let p = ring_xz(i as f32 / segments as f32 * TAU) * radius + Vec3::Y * y;
        m.push_vertex(p, n, planar_uv(p), paint);
    }
    for i in 0..segments {
        let (a, b) = (centre + 1 + i, centre + 2 + i);
        if up {
            m.indices.extend_from_slice(&[centre, a, b]);
        } else {
            m.indices.extend_from_slice(&[centre, b, a]);
        }
    }
}

/// Sphere centred on the origin. The pole rows emit one triangle per segment
/// because the second would be degenerate.
pub fn uv_sphere(radius: f32, rings: u32, segments: u32, color: Vec3, layer: Layer) -> Mesh {
    let paint = Paint::new(color, layer);
    let (rings, segments) = (rings.max(2), segments.max(3));
    let mut m = Mesh::new();
    for r in 0..=rings {
        let theta = r as f32 / rings as f32 * std::f32::consts::PI;
        for s in 0..=segments {
            let u = s as f32 / segments as f32;
            let n = ring_xz(u * TAU) * theta.sin() + Vec3::Y * theta.cos();
            let n = n.normalize();
            m.push_vertex(n * radius, n, Vec2::new(u, r as f32 / rings as f32), paint);
        }
    }
    let row = segments + 1;
    for r in 0..rings {
        for s in 0..segments {
            let a = r * row + s;
            let (b, c, d) = (a + 1, a + row + 1, a + row);
            if r + 1 < rings {
                m.indices.extend_from_slice(&[a, d, c]);
            }
            if r > 0 {
                m.indices.extend_from_slice(&[a, c, b]);
            }
        }
    }
    m
}

/// Parameters for [`wheel`], grouped because a spoke wheel has many knobs.
#[derive(Clone, Copy, Debug)]
pub struct WheelShape {
    pub radius: f32,
    pub rim_width: f32,
    pub thickness: f32,
    pub spokes: u32,
    pub segments: u32,
}

/// Flat ring in the XY plane (axle along Z) with thin spokes. Spinning it
/// sweeps straight edges through every angle, which is hard to upscale.
pub fn wheel(shape: WheelShape, color: Vec3, layer: Layer) -> Mesh {
    let paint = Paint::new(color, layer);
    let inner = shape.radius - shape.rim_width;
    let mut m = Mesh::new();
    push_annulus(&mut m, &shape, paint);

    let spoke_width = (shape.rim_width * 0.3).max(0.01);
    let hub_radius = (shape.radius * 0.1).max(spoke_width);
    // Spokes run from the hub into the rim so no gap shows at either end.
    let spoke_len = inner - hub_radius * 0.5 + shape.rim_width * 0.5;
    let spoke = cuboid(
        Vec3::new(spoke_len, spoke_width, shape.thickness * 0.6),
        1.0,
        color,
        layer,
    );
    let along = hub_radius * 0.5 + spoke_len * 0.5;
    for k in 0..shape.spokes.max(1) {
        let angle = k as f32 / shape.spokes.max(1) as f32 * TAU;
        let t = Mat4::from_rotation_z(angle) * Mat4::from_translation(Vec3::X * along);
        m.append(&spoke, t);
    }
    let hub = cylinder(hub_radius, shape.thickness * 1.5, 16, color, layer);
    m.append(&hub, Mat4::from_rotation_x(std::f32::consts::FRAC_PI_2));
    m
}

fn push_annulus(m: &mut Mesh, shape: &WheelShape, paint: Paint) {
    let (ro, ri) = (shape.radius, shape.radius - shape.rim_width);
    let hz = Vec3::Z * shape.thickness * 0.5;
    let segments = shape.segments.max(3);
    let circle = |a: f32| Vec3::new(a.cos(), a.sin(), 0.0);
    for i in 0..segments {
        let (t0, t1) = (i as f32 / segments as f32, (i + 1) as f32 / segments as f32);
        let (d0, d1) = (circle(t0 * TAU), circle(t1 * TAU));
        let (o0, o1, i0, i1) = (d0 * ro, d1 * ro, d0 * ri, d1 * ri);
        let u = |t: f32| t * TAU * ro;
        let uv = [
            Vec2::new(u(t0), 0.0),
            Vec2::new(u(t0), shape.rim_width),
            Vec2::new(u(t1), shape.rim_width),
            Vec2::new(u(t1), 0.0),
        ];
        m.push_quad(
            [i0 + hz, o0 + hz, o1 + hz, i1 + hz],
            [Vec3::Z; 4],
            uv,
            paint,
        );
        m.push_quad(
            [i1 - hz, o1 - hz, o0 - hz, i0 - hz],
            [Vec3::NEG_Z; 4],
            uv,
            paint,
        );
        m.push_quad(
            [o0 - hz, o1 - hz, o1 + hz, o0 + hz],
            [d0, d1, d1, d0],
            uv,
            paint,
        );
        m.push_quad(
            [i0 + hz, i1 + hz, i1 - hz, i0 - hz],
            [-d0, -d1, -d1, -d0],
            uv,
            paint,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHITE: Vec3 = Vec3::ONE;

    fn shape() -> WheelShape {
        WheelShape {
            radius: 1.4,
            rim_width: 0.12,
            thickness: 0.06,
            spokes: 12,
            segments: 48,
        }
    }

    fn all_builders() -> Vec<(&'static str, Mesh)> {
        let mut merged = Mesh::new();
        let thin = cuboid(Vec3::new(3.0, 0.02, 0.02), 1.0, WHITE, Layer::Plain);
        let t = Mat4::from_rotation_y(0.7)
            * Mat4::from_rotation_z(0.3)
            * Mat4::from_scale(Vec3::new(1.0, 5.0, 0.5));
        merged.append(&thin, t);
        let mild = Mat4::from_rotation_x(0.4) * Mat4::from_scale(Vec3::new(1.0, 1.5, 0.8));
        merged.append(&uv_sphere(1.0, 8, 12, WHITE, Layer::Plain), mild);
        let mirror = Mat4::from_scale(Vec3::new(-1.0, 1.0, 1.0));
        let mut mirrored = Mesh::new();
        mirrored.append(&cylinder(0.5, 2.0, 9, WHITE, Layer::Plain), mirror);
        vec![
            (
                "cuboid",
                cuboid(Vec3::new(2.0, 3.0, 0.5), 2.0, WHITE, Layer::Bricks),
            ),
            ("plane", plane(60.0, 40.0, 2.0, WHITE, Layer::Ground)),
            ("cylinder", cylinder(0.4, 3.0, 20, WHITE, Layer::Stripes)),
            ("sphere", uv_sphere(0.35, 12, 24, WHITE, Layer::Plain)),
            ("wheel", wheel(shape(), WHITE, Layer::Stripes)),
            ("appended", merged),
            ("mirrored", mirrored),
        ]
    }

    #[test]
    fn normals_are_unit_length() {
        for (name, m) in all_builders() {
            assert!(!m.vertices.is_empty(), "{name}");
            for v in &m.vertices {
                let len = Vec3::from(v.normal).length();
                assert!((len - 1.0).abs() < 1e-4, "{name}: normal length {len}");
            }
        }
    }

    #[test]
    fn indices_in_range_and_whole_triangles() {
        for (name, m) in all_builders() {
            assert_eq!(m.indices.len() % 3, 0, "{name}");
            let n = m.vertices.len() as u32;
            assert!(m.indices.iter().all(|&i| i < n), "{name}");
        }
    }

    #[test]
    fn winding_matches_normals() {
        for (name, m) in all_builders() {
            for tri in m.indices.chunks_exact(3) {
                let v = |i: u32| m.vertices[i as usize];
                let p = |i: u32| Vec3::from(v(i).pos);
                let face = (p(tri[1]) - p(tri[0])).cross(p(tri[2]) - p(tri[0]));
                assert!(face.length() > 1e-9, "{name}: degenerate triangle {tri:?}");
                for &i in tri {
                    let d = face.normalize().dot(Vec3::from(v(i).normal));
                    assert!(d > 0.5, "{name}: triangle {tri:?} faces away ({d})");
                }
            }
        }
    }

    #[test]
    fn append_offsets_indices_and_keeps_paint() {
        let a = cuboid(Vec3::ONE, 1.0, WHITE, Layer::Text);
        let mut m = a.clone();
        m.append(&a, Mat4::from_translation(Vec3::X * 5.0));
        assert_eq!(m.vertices.len(), 2 * a.vertices.len());
        assert_eq!(m.indices[a.indices.len()], a.indices[0] + 24);
        assert_eq!(m.vertices[30].color[3], Layer::Text as u32 as f32);
        assert_eq!(m.vertices[30].pos[0], a.vertices[6].pos[0] + 5.0);
    }

    #[test]
    fn uvs_tile_in_world_units() {
        let p = plane(10.0, 4.0, 2.0, WHITE, Layer::Ground);
        let max_u = p.vertices.iter().map(|v| v.uv[0]).fold(0.0, f32::max);
        let max_v = p.vertices.iter().map(|v| v.uv[1]).fold(0.0, f32::max);
        assert_eq!((max_u, max_v), (5.0, 2.0));
    }

    #[test]
    fn vertex_layout_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Vertex>(), 48);
        let m = cuboid(Vec3::ONE, 1.0, WHITE, Layer::Plain);
        assert_eq!(
            bytemuck::cast_slice::<Vertex, u8>(&m.vertices).len(),
            24 * 48
        );
    }
}
