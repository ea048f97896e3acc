// The composite's debug views of the scene pass's temporal inputs (overlay: "show motion
// vectors / depth"). DEBUG_MOTION: the motion image (render pixels, src/game/motion.rs): hue =
// direction, brightness = log length (0.1 px is visible, full at 16 px), black = still.
// DEBUG_DEPTH: the kept depth as log view distance, near white to far black.

const uint DEBUG_OFF = 0u;
const uint DEBUG_MOTION = 1u;
const uint DEBUG_DEPTH = 2u;

vec3 hsv_to_rgb(float h, float s, float v) {
    vec3 k = clamp(abs(mod(h * 6.0 + vec3(0.0, 4.0, 2.0), 6.0) - 3.0) - 1.0, 0.0, 1.0);
    return v * mix(vec3(1.0), k, s);
}

// `texel` is the sampled motion or depth image; near and far are the camera's clip planes.
vec3 debug_colour(uint mode, vec4 texel, float near, float far) {
    if (mode == DEBUG_MOTION) {
        vec2 m = texel.rg;
        float len = length(m);
        float hue = atan(m.y, m.x) / 6.2831853 + 0.5;
        return hsv_to_rgb(hue, 0.85, clamp(log2(1.0 + 8.0 * len) / 7.0, 0.0, 1.0));
    }
    float d = texel.r;
    float z = near * far / (far - d * (far - near));
    return vec3(1.0 - log(z / near) / log(far / near));
}
