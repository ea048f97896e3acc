//! Turning captured frames (RGBA8 or BGRA8 bytes read back from the GPU) into PNG files.

use std::path::Path;

use anyhow::Context as _;

/// Writes `pixels` (tightly packed, 4 bytes per pixel) as an opaque RGB PNG.
pub fn save_png(
    path: &Path,
    pixels: &[u8],
    width: u32,
    height: u32,
    bgra: bool,
) -> anyhow::Result<()> {
    let mut rgb = Vec::with_capacity((width * height * 3) as usize);
    for px in pixels.chunks_exact(4).take((width * height) as usize) {
        if bgra {
            rgb.extend_from_slice(&[px[2], px[1], px[0]]);
        } else {
            rgb.extend_from_slice(&px[..3]);
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    image::save_buffer(path, &rgb, width, height, image::ExtendedColorType::Rgb8)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bgra_is_swizzled() {
        let dir = std::env::temp_dir().join(format!("upscale-capture-{}", std::process::id()));
        let path = dir.join("p.png");
        super::save_png(&path, &[10, 20, 30, 255, 1, 2, 3, 255], 2, 1, true).unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        assert_eq!(img.get_pixel(0, 0).0, [30, 20, 10]);
        assert_eq!(img.get_pixel(1, 0).0, [3, 2, 1]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
