//! The overlay's "show motion vectors / depth" view on lavapipe with validation on: the
//! composite shows the scene pass's motion vectors false-coloured, or its depth in grey, instead
//! of the picture, and switching it costs no resources (the same session throughout).

mod common;

use upscale_demo::app::headless::Runner;
use upscale_demo::render::composite::DebugView;
use upscale_demo::upscale::Pattern;

#[test]
fn the_composite_shows_motion_or_depth() {
    let out = common::out_dir("debug_view");
    let mut r = Runner::new(&common::small_config(), Pattern::Bilinear).unwrap();
    let mut frames = Vec::new();
    for (i, view) in DebugView::ALL.into_iter().enumerate() {
        r.session.renderer.set_debug_view(view);
        // Two frames of the moving scripted camera, a sixth of a second apart: the second
        // has motion.
        let n = 20 * i as u64;
        r.frame(n, false).unwrap();
        r.frame(n + 10, true).unwrap();
        let dir = out.join(view.name().replace(' ', "_"));
        std::fs::create_dir_all(&dir).unwrap();
        r.save_pngs(&dir).unwrap();
        frames.push(image::open(dir.join("last.png")).unwrap().to_rgb8());
    }
    assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
    let [picture, motion, depth] = &frames[..] else {
        unreachable!()
    };
    assert!(common::luma_std(picture) > 20.0);
    // Motion: coloured (hue = direction), and lit where things move: the camera orbits, so
    // almost everything does.
    let coloured = motion
        .pixels()
        .filter(|p| p.0.iter().max().unwrap() - p.0.iter().min().unwrap() > 40)
        .count();
    let total = (motion.width() * motion.height()) as usize;
    assert!(
        coloured > total / 2,
        "{coloured} of {total} pixels coloured"
    );
    // Depth: grey, near bright and far dark, so it varies.
    assert!(
        depth.pixels().all(|p| p[0] == p[1] && p[1] == p[2]),
        "depth is grey"
    );
    assert!(
        common::luma_std(depth) > 10.0,
        "depth varies across the frame"
    );
    drop(r);
}
