use super::*;

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("upscale-tex-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Mean absolute difference of luma between horizontal neighbours.
fn horizontal_detail(img: &RgbaImage) -> f64 {
    let luma = |p: &Rgba<u8>| (p[0] as f64 + p[1] as f64 + p[2] as f64) / 3.0;
    let mut sum = 0.0;
    for y in 0..SIZE {
        for x in 0..SIZE - 1 {
            sum += (luma(img.get_pixel(x + 1, y)) - luma(img.get_pixel(x, y))).abs();
        }
    }
    sum / f64::from(SIZE * (SIZE - 1))
}

#[test]
fn generate_is_deterministic() {
    for layer in Layer::ALL {
        assert!(generate(layer) == generate(layer), "{layer:?}");
    }
}

#[test]
fn layers_have_high_frequency_detail() {
    for layer in Layer::ALL {
        let img = generate(layer);
        assert_eq!(img.dimensions(), (SIZE, SIZE));
        let detail = horizontal_detail(&img);
        if layer == Layer::Plain {
            assert_eq!(detail, 0.0);
        } else {
            assert!(detail > 6.0, "{layer:?} detail {detail}");
        }
    }
}

#[test]
fn plain_is_last_and_indices_match_discriminants() {
    assert_eq!(*Layer::ALL.last().unwrap(), Layer::Plain);
    for (i, layer) in Layer::ALL.iter().enumerate() {
        assert_eq!(*layer as usize, i);
    }
}

#[test]
fn write_then_load_round_trips() {
    let dir = scratch_dir("roundtrip");
    write_all(&dir).unwrap();
    let loaded = load_all(&dir).unwrap();
    assert_eq!(loaded.len(), Layer::ALL.len());
    for (img, layer) in loaded.iter().zip(Layer::ALL) {
        assert!(*img == generate(layer), "{layer:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_file_names_path_and_fix() {
    let dir = scratch_dir("missing");
    let err = load_all(&dir).unwrap_err();
    assert!(matches!(err, TextureError::NotFound { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("ground.png: file not found"), "{msg}");
    assert!(msg.contains("upscale-demo gen-assets"), "{msg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_size_is_reported() {
    let dir = scratch_dir("size");
    write_all(&dir).unwrap();
    let path = dir.join(Layer::Text.file_name());
    RgbaImage::new(128, 128).save(&path).unwrap();
    let err = load_all(&dir).unwrap_err();
    assert!(matches!(err, TextureError::WrongSize { width: 128, .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("text.png is 128×128, expected 256×256"),
        "{msg}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn committed_assets_match_generator() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let loaded = load_all(&dir).expect("assets/ out of date");
    for (img, layer) in loaded.iter().zip(Layer::ALL) {
        assert!(
            *img == generate(layer),
            "assets/{} is stale",
            layer.file_name()
        );
    }
}
