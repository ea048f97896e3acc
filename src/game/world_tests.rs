use super::*;

const STEP: f32 = 1.0 / 60.0;

fn idle() -> Input {
    Input::default()
}

/// Puts the player's body on top of orb `i` and steps once.
fn touch_orb(w: &mut World, i: usize) {
    w.camera.pos = w.orbs()[i].position(w.time) + Vec3::Y * BODY_BELOW_EYE;
    w.update(0.0, &idle());
}

fn count(draws: &[Draw], id: MeshId) -> usize {
    draws.iter().filter(|d| d.mesh == id).count()
}

#[test]
fn same_seed_same_world() {
    let (a, b) = (World::new(7), World::new(7));
    let bytes = |w: &World| bytemuck::cast_slice::<_, u8>(&w.static_mesh.vertices).to_vec();
    assert_eq!(bytes(&a), bytes(&b));
    assert_eq!(a.static_mesh.indices, b.static_mesh.indices);
    assert_eq!(a.orbs(), b.orbs());
}

#[test]
fn different_seed_different_orbs() {
    let (a, b) = (World::new(1), World::new(2));
    assert_ne!(a.orbs(), b.orbs());
    assert_eq!(a.orb_count, ORB_COUNT);
    assert_eq!(a.orbs().len(), ORB_COUNT as usize);
}

#[test]
fn static_mesh_is_well_formed() {
    let w = World::new(3);
    let m = &w.static_mesh;
    assert_eq!(m.indices.len() % 3, 0);
    assert!(m.indices.iter().all(|&i| (i as usize) < m.vertices.len()));
    for v in &m.vertices {
        assert!((Vec3::from(v.normal).length() - 1.0).abs() < 1e-4);
        let p = Vec3::from(v.pos);
        assert!(p.x.abs() <= ARENA_HALF + 1.5 && p.z.abs() <= ARENA_HALF + 1.5);
    }
}

#[test]
fn orbs_start_out_of_reach_and_inside_arena() {
    let mut w = World::new(11);
    w.update(STEP, &idle());
    assert_eq!(w.score, 0);
    for o in w.orbs() {
        assert!(o.home.x.abs() < PLAYER_BOUND && o.home.z.abs() < PLAYER_BOUND);
    }
}

#[test]
fn walking_into_an_orb_collects_it() {
    let mut w = World::new(5);
    let target = w.orbs()[0].home;
    let start = target + Vec3::new(2.5, 0.0, 0.0);
    w.camera.pos = Vec3::new(start.x, EYE_HEIGHT, start.z);
    let (yaw, _) = Camera::angles_toward(target - start);
    w.camera.yaw = yaw;
    let forward = Input {
        forward: true,
        ..idle()
    };
    for _ in 0..60 {
        w.update(STEP, &forward);
    }
    assert!(w.orbs()[0].collected);
    assert!(w.score >= 1);
    assert_eq!(
        w.score as usize,
        w.orbs().iter().filter(|o| o.collected).count()
    );
}

#[test]
fn collecting_all_finishes_and_stops_timer() {
    let mut w = World::new(9);
    w.update(0.5, &idle());
    for i in 0..w.orbs().len() {
        assert!(w.finished_at.is_none());
        touch_orb(&mut w, i);
    }
    assert_eq!(w.score, w.orb_count);
    let done = w.finished_at.expect("finished");
    assert_eq!(done, w.elapsed);
    let time_before = w.time;
    for _ in 0..30 {
        w.update(STEP, &idle());
    }
    assert_eq!(w.elapsed, done);
    assert_eq!(w.finished_at, Some(done));
    assert!(w.time > time_before, "animation keeps running");
}

#[test]
fn restart_brings_everything_back() {
    let mut w = World::new(9);
    w.update(1.0, &idle());
    touch_orb(&mut w, 3);
    w.restart();
    assert_eq!((w.score, w.elapsed, w.finished_at), (0, 0.0, None));
    assert!(w.orbs().iter().all(|o| !o.collected));
    assert_eq!(w.orbs(), World::new(9).orbs());
}

#[test]
fn player_cannot_leave_arena() {
    let mut w = World::new(1);
    let run = Input {
        forward: true,
        left: true,
        up: true,
        sprint: true,
        ..idle()
    };
    for yaw in [0.0, 1.0, 2.5, -2.0, 3.1] {
        w.camera.yaw = yaw;
        for _ in 0..400 {
            w.update(0.05, &run);
            let p = w.camera.pos;
            assert!(p.x.abs() <= PLAYER_BOUND && p.z.abs() <= PLAYER_BOUND);
            assert!(p.y <= EYE_RANGE.1);
        }
    }
}

#[test]
fn huge_dt_is_clamped() {
    let mut w = World::new(1);
    let start = w.camera.pos;
    let run = Input {
        forward: true,
        ..idle()
    };
    w.update(10.0, &run);
    assert!(w.camera.pos.distance(start) <= WALK_SPEED * MAX_DT + 1e-4);
}

#[test]
fn mouse_look_turns_and_clamps_pitch() {
    let mut w = World::new(1);
    let look = |d: Vec2| Input {
        look_delta: d,
        ..idle()
    };
    w.update(STEP, &look(Vec2::new(100.0, 0.0)));
    assert!(w.camera.yaw > 0.0, "moving the mouse right turns right");
    w.update(STEP, &look(Vec2::new(0.0, -1e6)));
    assert_eq!(w.camera.pitch, PITCH_LIMIT);
    w.update(STEP, &look(Vec2::new(0.0, 1e6)));
    assert_eq!(w.camera.pitch, -PITCH_LIMIT);
}

/// `game.mouse_sensitivity` is degrees per pixel: 300 px at 0.15 turn 45°, both ways and on
/// both axes (the window used to scale the pixels by it and the world again by its own factor).
#[test]
fn mouse_look_turns_the_configured_degrees_per_pixel() {
    for (sensitivity, pixels, degrees) in [
        (0.15, 300.0, 45.0),
        (0.15, -100.0, -15.0),
        (1.0, 30.0, 30.0),
    ] {
        let mut w = World::new(1);
        w.mouse_sensitivity = sensitivity;
        let (yaw, pitch) = (w.camera.yaw, w.camera.pitch);
        let look = |d: Vec2| Input {
            look_delta: d,
            ..idle()
        };
        w.update(STEP, &look(Vec2::new(pixels, 0.0)));
        let turned = (w.camera.yaw - yaw).to_degrees();
        assert!(
            (turned - degrees).abs() < 1e-3,
            "{pixels} px at {sensitivity}: yaw {turned}°"
        );
        w.update(STEP, &look(Vec2::new(0.0, -pixels / 10.0)));
        let raised = (w.camera.pitch - pitch).to_degrees();
        assert!(
            (raised - degrees / 10.0).abs() < 1e-3,
            "{pixels} px up: pitch {raised}°"
        );
    }
}

#[test]
fn draws_order_and_collected_orbs_disappear() {
    let mut w = World::new(4);
    let mut out = Vec::new();
    w.draws(&mut out);
    assert_eq!(out[0].mesh, MeshId::Static);
    assert_eq!(count(&out, MeshId::Wheel), 4);
    assert_eq!(count(&out, MeshId::Orb), ORB_COUNT as usize);
    assert!(out[1..5].iter().all(|d| d.mesh == MeshId::Wheel));
    assert!(out[5..]
        .iter()
        .all(|d| d.mesh == MeshId::Orb && d.emissive > 0.0));
    touch_orb(&mut w, 0);
    let (cap, ptr) = (out.capacity(), out.as_ptr());
    w.draws(&mut out);
    assert_eq!(count(&out, MeshId::Orb), ORB_COUNT as usize - 1);
    assert_eq!(
        (out.capacity(), out.as_ptr()),
        (cap, ptr),
        "no reallocation"
    );
}

#[test]
fn wheels_spin_over_time() {
    let mut w = World::new(4);
    let mut a = Vec::new();
    let mut b = Vec::new();
    w.draws(&mut a);
    w.update(0.05, &idle());
    w.draws(&mut b);
    assert_ne!(a[1].model, b[1].model);
    assert_eq!(a[1].model.w_axis, b[1].model.w_axis, "spins in place");
}

#[test]
fn scripted_is_repeatable_and_does_not_collect() {
    let mut w = World::new(2);
    w.set_scripted(42);
    let first = (w.camera, w.time);
    w.set_scripted(900);
    w.set_scripted(42);
    assert_eq!((w.camera, w.time), first);
    assert_eq!(w.time, 42.0 / 60.0);
    for frame in 0..3000 {
        w.set_scripted(frame);
    }
    assert_eq!(w.score, 0);
}

#[test]
fn sun_dir_is_normalized_and_above_horizon() {
    let s = World::new(0).sun_dir();
    assert!((s.length() - 1.0).abs() < 1e-6 && s.y > 0.0);
}

#[test]
fn draws_at_another_time_are_the_same_objects_moved() {
    let mut w = World::new(7);
    w.time = 2.0;
    touch_orb(&mut w, 3);
    let (mut now, mut before) = (Vec::new(), Vec::new());
    w.draws(&mut now);
    w.draws_at(w.time - 0.1, &mut before);
    assert_eq!(now.len(), before.len(), "the same draws, in the same order");
    for (a, b) in now.iter().zip(&before) {
        assert_eq!(a.mesh, b.mesh);
    }
    assert_eq!(
        now[0].model, before[0].model,
        "the static world does not move"
    );
    // A wheel turns about its axle (local +Z) by its speed times the time step.
    let (a, b) = (now[1].model, before[1].model);
    let rel = b.inverse() * a;
    assert!(rel.w_axis.truncate().length() < 1e-4, "it stays in place");
    let turn = rel.x_axis.y.atan2(rel.x_axis.x);
    let speed = w.wheels[0].speed;
    assert!(
        (turn - speed * 0.1).abs() < 1e-4,
        "{turn} vs {}",
        speed * 0.1
    );
    // An orb floats along Y.
    let orb = now.iter().position(|d| d.mesh == MeshId::Orb).unwrap();
    let lift = now[orb].model.w_axis.y - before[orb].model.w_axis.y;
    assert!(lift.abs() > 1e-3 && lift.abs() < ORB_BOB * 2.0, "{lift}");
    assert_eq!(now[orb].model.w_axis.x, before[orb].model.w_axis.x);
}
