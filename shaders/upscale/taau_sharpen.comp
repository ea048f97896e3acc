#version 450
// The temporal upscaler's last step (`src/upscale/taau.rs`, step e): robust contrast-adaptive
// sharpening (FSR 1's RCAS without its noise detection) of the new history into the output
// image. The history itself stays unsharpened, so sharpening never accumulates.
layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) uniform sampler2D history;
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D upscaled;

layout(push_constant) uniform Push {
    // 0: none; 1: the strongest lobe RCAS allows.
    float sharpness;
} pc;

// RCAS's limit on the negative lobe, which keeps the filter from ringing.
const float LOBE_LIMIT = 0.25 - 1.0 / 16.0;

void main() {
    ivec2 size = imageSize(upscaled);
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) {
        return;
    }
    ivec2 last = size - 1;
    vec3 e = texelFetch(history, p, 0).rgb;
    vec3 b = texelFetch(history, clamp(p + ivec2(0, -1), ivec2(0), last), 0).rgb;
    vec3 d = texelFetch(history, clamp(p + ivec2(-1, 0), ivec2(0), last), 0).rgb;
    vec3 f = texelFetch(history, clamp(p + ivec2(1, 0), ivec2(0), last), 0).rgb;
    vec3 h = texelFetch(history, clamp(p + ivec2(0, 1), ivec2(0), last), 0).rgb;
    e = clamp(e, 0.0, 1.0);
    vec3 mn = clamp(min(min(b, d), min(f, h)), 0.0, 1.0);
    vec3 mx = clamp(max(max(b, d), max(f, h)), 0.0, 1.0);
    // The largest negative lobe that keeps the result inside [0, 1] for every channel.
    vec3 hit_min = min(mn, e) / (4.0 * mx + 1e-5);
    vec3 hit_max = (1.0 - max(mx, e)) / (4.0 * mn - 4.0 - 1e-5);
    vec3 lobe3 = max(-hit_min, hit_max);
    float lobe = max(-LOBE_LIMIT, min(max(lobe3.r, max(lobe3.g, lobe3.b)), 0.0)) * pc.sharpness;
    vec3 c = (lobe * (b + d + f + h) + e) / (4.0 * lobe + 1.0);
    imageStore(upscaled, p, vec4(clamp(c, 0.0, 1.0), 1.0));
}
