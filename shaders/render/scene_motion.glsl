// The scene pass's motion-vector inputs (src/render/scene_motion.rs writes them) and the one
// place the vectors' convention lives in GLSL: render pixels, +x right, +y down, current minus
// previous position (pixel_prev = pixel_cur - motion), both unjittered (src/game/motion.rs).
// Define MOTION_BINDING before including.

struct DrawMotion {
    mat4 mvp;      // this frame, unjittered
    mat4 prev_mvp; // the previous frame: its camera and this draw's previous transform
};

layout(std430, set = 0, binding = MOTION_BINDING) readonly buffer SceneMotion {
    mat4 view_proj;      // unjittered
    mat4 prev_view_proj;
    vec4 size;           // xy: the target's size in pixels
    DrawMotion draws[];
} scene_motion;

// Motion between two clip-space positions of the same point; zero where either is behind the
// camera (no previous position to point at).
vec2 motion_pixels(vec4 cur, vec4 prev) {
    if (cur.w <= 0.0 || prev.w <= 0.0) {
        return vec2(0.0);
    }
    return (cur.xy / cur.w - prev.xy / prev.w) * 0.5 * scene_motion.size.xy;
}
