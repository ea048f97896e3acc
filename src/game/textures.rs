//! Procedural textures with deliberately fine detail (1-px lines, small
//! glyphs, thin stripes) so that upscaling quality differences are visible.
//!
//! Every texture is generated from a fixed seed, so the PNGs in `assets/` can
//! always be recreated bit-for-bit by `upscale-demo gen-assets`. Colour values
//! are chosen directly in sRGB; all textures tile seamlessly.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageError, Rgba, RgbaImage};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg32;

pub const SIZE: u32 = 256;

const REGEN_HINT: &str = "run `upscale-demo gen-assets` to recreate the textures";

/// Texture array layer. The discriminant is the array index the shader
/// receives through [`super::mesh::Vertex::color`]'s `w` component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Layer {
    Ground = 0,
    Text = 1,
    Stripes = 2,
    Bricks = 3,
    Circuit = 4,
    /// Plain white, so a vertex tint alone decides the colour.
    Plain = 5,
}

impl Layer {
    pub const ALL: [Layer; 6] = [
        Layer::Ground,
        Layer::Text,
        Layer::Stripes,
        Layer::Bricks,
        Layer::Circuit,
        Layer::Plain,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            Layer::Ground => "ground.png",
            Layer::Text => "text.png",
            Layer::Stripes => "stripes.png",
            Layer::Bricks => "bricks.png",
            Layer::Circuit => "circuit.png",
            Layer::Plain => "plain.png",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TextureError {
    #[error("{}: file not found ({REGEN_HINT})", path.display())]
    NotFound { path: PathBuf },
    #[error("{} is {width}×{height}, expected {SIZE}×{SIZE} ({REGEN_HINT})", path.display())]
    WrongSize {
        path: PathBuf,
        width: u32,
        height: u32,
    },
    #[error("{}: cannot read PNG: {error} ({REGEN_HINT})", path.display())]
    Read { path: PathBuf, error: ImageError },
    #[error("{}: cannot write PNG: {error} (check that the directory is writable)", path.display())]
    Write { path: PathBuf, error: ImageError },
    #[error("{}: cannot create file or directory: {error} (check that the path is writable)", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

pub fn generate(layer: Layer) -> RgbaImage {
    match layer {
        Layer::Ground => ground(),
        Layer::Text => text(),
        Layer::Stripes => stripes(),
        Layer::Bricks => bricks(),
        Layer::Circuit => circuit(),
        Layer::Plain => RgbaImage::from_pixel(SIZE, SIZE, Rgba([255; 4])),
    }
}

/// Writes every layer as `dir/<file_name>`, creating `dir` if needed.
pub fn write_all(dir: &Path) -> Result<(), TextureError> {
    std::fs::create_dir_all(dir).map_err(|source| TextureError::Io {
        path: dir.to_path_buf(),
        error: source,
    })?;
    for layer in Layer::ALL {
        let path = dir.join(layer.file_name());
        let io_err = |source| TextureError::Io {
            path: path.clone(),
            error: source,
        };
        let file = File::create(&path).map_err(io_err)?;
        // Best compression keeps the committed PNGs small; it only costs time
        // in the rare gen-assets run.
        let encoder = PngEncoder::new_with_quality(
            BufWriter::new(file),
            CompressionType::Best,
            FilterType::Adaptive,
        );
        generate(layer)
            .write_with_encoder(encoder)
            .map_err(|source| TextureError::Write {
                path: path.clone(),
                error: source,
            })?;
    }
    Ok(())
}

/// Loads every layer from `dir`, in [`Layer::ALL`] order.
pub fn load_all(dir: &Path) -> Result<Vec<RgbaImage>, TextureError> {
    Layer::ALL
        .iter()
        .map(|layer| load(&dir.join(layer.file_name())))
        .collect()
}

fn load(path: &Path) -> Result<RgbaImage, TextureError> {
    let img = image::open(path).map_err(|source| match source {
        ImageError::IoError(e) if e.kind() == std::io::ErrorKind::NotFound => {
            TextureError::NotFound {
                path: path.to_path_buf(),
            }
        }
        source => TextureError::Read {
            path: path.to_path_buf(),
            error: source,
        },
    })?;
    if img.width() != SIZE || img.height() != SIZE {
        return Err(TextureError::WrongSize {
            path: path.to_path_buf(),
            width: img.width(),
            height: img.height(),
        });
    }
    Ok(img.to_rgba8())
}

fn rgb(r: u8, g: u8, b: u8) -> Rgba<u8> {
    Rgba([r, g, b, 255])
}

/// Writes with wrap-around so shapes crossing an edge keep the texture tileable.
fn put(img: &mut RgbaImage, x: i32, y: i32, c: Rgba<u8>) {
    let s = SIZE as i32;
    img.put_pixel(x.rem_euclid(s) as u32, y.rem_euclid(s) as u32, c);
}

fn fill_rect(img: &mut RgbaImage, x: i32, y: i32, w: i32, h: i32, c: Rgba<u8>) {
    for dy in 0..h {
        for dx in 0..w {
            put(img, x + dx, y + dy, c);
        }
    }
}

fn shade(c: Rgba<u8>, d: i32) -> Rgba<u8> {
    let f = |v: u8| (v as i32 + d).clamp(0, 255) as u8;
    rgb(f(c[0]), f(c[1]), f(c[2]))
}

/// Cheap integer hash for per-pixel variation without consuming the RNG.
fn hash(x: u32, y: u32, salt: u32) -> u32 {
    let mut h = x.wrapping_mul(0x9E37_79B1) ^ y.wrapping_mul(0x85EB_CA77) ^ salt;
    h ^= h >> 15;
    h = h.wrapping_mul(0x2C1B_3C6D);
    h ^ (h >> 12)
}

fn ground() -> RgbaImage {
    const TILE: u32 = 32;
    let mut rng = Pcg32::seed_from_u64(0x6772_6f75);
    let tiles = SIZE / TILE;
    let bases: Vec<Rgba<u8>> = (0..tiles * tiles)
        .map(|_| {
            let v = rng.random_range(105..140u8);
            // An occasional warm tile gives the eye landmarks when moving.
            if rng.random_bool(0.1) {
                rgb(v.saturating_add(40), v, v.saturating_sub(30))
            } else {
                rgb(v, v.saturating_add(4), v.saturating_add(2))
            }
        })
        .collect();
    RgbaImage::from_fn(SIZE, SIZE, |x, y| {
        let (tx, ty) = (x % TILE, y % TILE);
        if tx == 0 || ty == 0 {
            return rgb(48, 50, 52);
        }
        if tx == TILE / 2 || ty == TILE / 2 {
            return shade(bases[((y / TILE) * tiles + x / TILE) as usize], 28);
        }
        let base = bases[((y / TILE) * tiles + x / TILE) as usize];
        let checker = if ((x / 2) + (y / 2)) % 2 == 0 {
            10
        } else {
            -10
        };
        shade(base, checker)
    })
}

/// 5×7 bitmap glyphs, one byte per row, bit 4 is the leftmost column.
const GLYPHS: [[u8; 7]; 36] = [
    [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11], // A
    [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E], // B
    [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E], // C
    [0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E], // D
    [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F], // E
    [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10], // F
    [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F], // G
    [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11], // H
    [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E], // I
    [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C], // J
    [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11], // K
    [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F], // L
    [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11], // M
    [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11], // N
    [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], // O
    [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10], // P
    [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D], // Q
    [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11], // R
    [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E], // S
    [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04], // T
    [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], // U
    [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04], // V
    [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A], // W
    [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11], // X
    [0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04], // Y
    [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F], // Z
    [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E], // 0
    [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E], // 1
    [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F], // 2
    [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E], // 3
    [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02], // 4
    [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E], // 5
    [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E], // 6
    [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08], // 7
    [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E], // 8
    [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C], // 9
];

fn glyph_index(ch: char) -> Option<usize> {
    match ch {
        'A'..='Z' => Some(ch as usize - 'A' as usize),
        '0'..='9' => Some(26 + ch as usize - '0' as usize),
        _ => None,
    }
}

/// Draws `s` at pixel scale `scale`; returns the x after the last glyph.
fn draw_text(img: &mut RgbaImage, s: &str, x: i32, y: i32, scale: i32, c: Rgba<u8>) -> i32 {
    let mut cx = x;
    for ch in s.chars() {
        if let Some(g) = glyph_index(ch) {
            for (row, bits) in GLYPHS[g].iter().enumerate() {
                for col in 0..5 {
                    if bits & (0x10 >> col) != 0 {
                        fill_rect(
                            img,
                            cx + col * scale,
                            y + row as i32 * scale,
                            scale,
                            scale,
                            c,
                        );
                    }
                }
            }
        }
        cx += 6 * scale;
    }
    cx
}

fn random_word(rng: &mut Pcg32) -> String {
    let len = rng.random_range(2..9);
    (0..len)
        .map(|_| {
            let i = if rng.random_bool(0.15) {
                rng.random_range(26..36)
            } else {
                rng.random_range(0..26)
            };
            if i < 26 {
                (b'A' + i as u8) as char
            } else {
                (b'0' + (i - 26) as u8) as char
            }
        })
        .collect()
}

fn text() -> RgbaImage {
    let mut rng = Pcg32::seed_from_u64(0x7465_7874);
    let mut img = RgbaImage::new(SIZE, SIZE);
    let panels = [
        ("UPSCALE DEMO", rgb(236, 230, 212), rgb(40, 60, 120)),
        ("ARENA NOTICE 7", rgb(222, 228, 236), rgb(150, 40, 36)),
    ];
    let half = SIZE as i32 / 2;
    for (i, (title, paper, accent)) in panels.into_iter().enumerate() {
        let top = i as i32 * half;
        fill_rect(&mut img, 0, top, SIZE as i32, half, rgb(30, 30, 34));
        fill_rect(&mut img, 2, top + 2, SIZE as i32 - 4, half - 4, paper);
        fill_rect(&mut img, 4, top + 4, SIZE as i32 - 8, 18, accent);
        draw_text(&mut img, title, 8, top + 6, 2, rgb(250, 250, 250));
        let ink = rgb(24, 24, 30);
        for line in 0..11 {
            let y = top + 26 + line * 9;
            let end = if line % 4 == 3 { 150 } else { SIZE as i32 - 10 };
            let mut x = 8;
            loop {
                let word = random_word(&mut rng);
                if x + 6 * word.len() as i32 > end {
                    break;
                }
                x = draw_text(&mut img, &word, x, y, 1, ink) + 5;
            }
        }
    }
    img
}

fn stripes() -> RgbaImage {
    // (a, b, period, colour 1, colour 2): stripes follow (a·x + b·y) mod period;
    // a power-of-two period divides 256, so every quadrant pattern tiles.
    let quads = [
        (1, 1, 8, rgb(240, 200, 30), rgb(25, 25, 25)),
        (2, -1, 16, rgb(210, 40, 40), rgb(240, 240, 240)),
        (1, 3, 16, rgb(40, 90, 200), rgb(235, 235, 235)),
        (1, -1, 4, rgb(60, 170, 80), rgb(20, 40, 25)),
    ];
    let half = SIZE / 2;
    RgbaImage::from_fn(SIZE, SIZE, |x, y| {
        let (a, b, period, c1, c2) = quads[((y / half) * 2 + x / half) as usize];
        let v = (a * x as i32 + b * y as i32).rem_euclid(period);
        if v < period / 2 {
            c1
        } else {
            c2
        }
    })
}

fn bricks() -> RgbaImage {
    const W: u32 = 32;
    const H: u32 = 16;
    let mut rng = Pcg32::seed_from_u64(0x6272_6963);
    let (cols, rows) = (SIZE / W, SIZE / H);
    let tints: Vec<i32> = (0..cols * rows)
        .map(|_| rng.random_range(-22..22))
        .collect();
    let mortar = rgb(175, 170, 160);
    RgbaImage::from_fn(SIZE, SIZE, |x, y| {
        let row = y / H;
        let xs = (x + (row % 2) * (W / 2)) % SIZE;
        let (bx, by) = (xs % W, y % H);
        if bx >= W - 2 || by >= H - 2 {
            return mortar;
        }
        let base = shade(rgb(150, 64, 46), tints[(row * cols + xs / W) as usize]);
        let bevel = match by {
            0 => 24,
            b if b == H - 3 => -26,
            _ => 0,
        };
        // Speckle on 2×2 cells: visible grain that still compresses well.
        let grain = (hash(x / 2, y / 2, 7) % 4) as i32 * 6 - 9;
        shade(base, bevel + grain)
    })
}

const DIRS: [(i32, i32); 8] = [
    (1, 0),
    (1, 1),
    (0, 1),
    (-1, 1),
    (-1, 0),
    (-1, -1),
    (0, -1),
    (1, -1),
];

fn pad(img: &mut RgbaImage, x: i32, y: i32, copper: Rgba<u8>, board: Rgba<u8>) {
    fill_rect(img, x - 2, y - 2, 5, 5, copper);
    put(img, x, y, board);
}

/// Random walk on an 8-px lattice turning by at most 45°, so traces only run
/// at 0/45/90 degrees like real PCB routing.
fn trace(img: &mut RgbaImage, rng: &mut Pcg32, copper: Rgba<u8>, board: Rgba<u8>) {
    let (mut x, mut y) = (rng.random_range(0..32) * 8, rng.random_range(0..32) * 8);
    let mut dir = rng.random_range(0..8usize);
    let wide = rng.random_bool(0.3);
    pad(img, x, y, copper, board);
    for _ in 0..rng.random_range(4..14) {
        if rng.random_bool(0.35) {
            dir = (dir + if rng.random_bool(0.5) { 1 } else { 7 }) % 8;
        }
        let (dx, dy) = DIRS[dir];
        let (ox, oy) = if dy == 0 { (0, 1) } else { (1, 0) };
        for _ in 0..8 {
            x += dx;
            y += dy;
            put(img, x, y, copper);
            if wide {
                put(img, x + ox, y + oy, copper);
            }
        }
    }
    pad(img, x, y, copper, board);
}

fn chip(img: &mut RgbaImage, rng: &mut Pcg32) {
    let (x, y) = (rng.random_range(0..32) * 8, rng.random_range(0..32) * 8);
    let (w, h) = (rng.random_range(3..6) * 8, rng.random_range(2..4) * 8);
    let pin = rgb(200, 200, 205);
    for px in (x + 2..x + w - 1).step_by(4) {
        fill_rect(img, px, y - 3, 1, 3, pin);
        fill_rect(img, px, y + h, 1, 3, pin);
    }
    fill_rect(img, x, y, w, h, rgb(28, 28, 32));
    let label = random_word(rng);
    let label: String = label.chars().take((w as usize - 4) / 6).collect();
    draw_text(img, &label, x + 3, y + h / 2 - 3, 1, rgb(150, 150, 150));
}

fn circuit() -> RgbaImage {
    let mut rng = Pcg32::seed_from_u64(0x6369_7263);
    let board = rgb(16, 72, 42);
    let mut img = RgbaImage::from_fn(SIZE, SIZE, |x, y| {
        if x % 16 == 0 && y % 16 == 0 {
            rgb(40, 110, 70)
        } else {
            board
        }
    });
    let copper = rgb(212, 168, 72);
    for _ in 0..46 {
        trace(&mut img, &mut rng, copper, board);
    }
    for _ in 0..5 {
        chip(&mut img, &mut rng);
    }
    img
}

#[cfg(test)]
#[path = "textures_tests.rs"]
mod tests;
