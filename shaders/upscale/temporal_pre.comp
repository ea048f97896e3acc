#version 450
// variants: FP16
// Pre-process of a temporal model (`models/README.md`, `tools/train/temporal.py` defines every
// input): one invocation per render pixel writes the model's concatenated inputs (channels 0-2
// colour, 3 depth, 4-5 motion, 6-17 history, 18-19 jitter, NCHW: the graph's Concat, which the
// in-stream engine then skips; for shared-memory the five inputs are views of this one tensor)
// and, with WRITE_WARPED (in-stream), the history alone into `warped` for the post-process,
// which adds it to the network's correction. The history: the four output pixels this render pixel
// covers, of the previous output warped to this frame (space-to-depth: channel c*4 + i*2 + j =
// output pixel (2y + i, 2x + j) of colour c); on a reset the bilinear x2 of this frame's colour,
// and the motion input zero.
//
// The warp, for output pixel o (centre o + 0.5), ratio = render size / output size:
//   p = (o + 0.5) * ratio                      its unjittered render position
//   k = clamp(floor(p + jitter), 0, size - 1)  the render pixel that shows it
//   q = (o + 0.5) - motion[k] / ratio          where it was in the previous output
//   history[o] = resample(previous output, q)  clamp to edge, fp32 weights: bilinear from four
//                                              fetches, or with CATMULL_ROM (a model whose
//                                              metadata says upscale.history_filter =
//                                              catmull_rom) the separable Catmull-Rom spline
//                                              from 4 x 4, each row summed in x, then the rows
// The previous output is the model's output clamped to 0..1 in fp16 (`temporal_post.comp` keeps
// it beside the 8-bit image: a float history carries no 8-bit rounding on to the next frame).
// With CLAMP_HISTORY (a model whose metadata says upscale.history_clamp = color_3x3) the warped
// history is clamped per colour channel to the min and max of this frame's colour over the
// 3x3 render pixels around this one (clamped to the edge), in fp32.
#include "ops/precision.glsl"
layout(local_size_x = 16, local_size_y = 8) in;
// Off where the runtime runs the whole graph (shared-memory): `warped` is then not written.
layout(constant_id = 0) const bool WRITE_WARPED = true;
layout(constant_id = 1) const bool CLAMP_HISTORY = false;
layout(constant_id = 2) const bool CATMULL_ROM = false;

layout(set = 0, binding = 0) uniform sampler2D color_in;
layout(set = 0, binding = 1) uniform sampler2D depth_in;
layout(set = 0, binding = 2) uniform sampler2D motion_in;
// The previous output, RGBA fp16 (two packed words) per output pixel (row-major).
layout(set = 0, binding = 3) readonly buffer History { uvec2 history_in[]; };
layout(set = 0, binding = 4) writeonly buffer Inputs { sfp inputs_t[]; };
layout(set = 0, binding = 5) writeonly buffer Warped { sfp warped_t[]; };

// First channel of each input in the concatenation.
const uint COLOR = 0u, DEPTH = 3u, MOTION = 4u, HISTORY = 6u, JITTER = 18u;

layout(push_constant) uniform Push {
    vec2 jitter;
    // 1: no usable history (reset, first frame, or no motion vectors given).
    uint reset;
    // 1: depth and motion images are bound (else zeros are written).
    uint has_motion;
} pc;

ivec2 g_out_size;

vec3 previous(ivec2 o) {
    o = clamp(o, ivec2(0), g_out_size - 1);
    uvec2 h = history_in[o.y * g_out_size.x + o.x];
    return vec3(unpackHalf2x16(h.x), unpackHalf2x16(h.y).x);
}

// Bilinear over texel centres at q (output pixels), clamped to the edge.
vec3 sample_previous(vec2 q) {
    vec2 s = q - 0.5;
    vec2 f0 = floor(s);
    vec2 w = s - f0;
    ivec2 i0 = ivec2(f0);
    vec3 a = mix(previous(i0), previous(i0 + ivec2(1, 0)), w.x);
    vec3 b = mix(previous(i0 + ivec2(0, 1)), previous(i0 + ivec2(1, 1)), w.x);
    return mix(a, b, w.y);
}

// The Catmull-Rom weights of the taps at -1, 0, 1, 2 from the texel at or left of the
// position, for its fraction t (as src/upscale/model/temporal.rs and temporal.py write them).
vec4 catmull_rom_weights(float t) {
    return vec4(t * (-0.5 + t * (1.0 - 0.5 * t)), 1.0 + t * t * (-2.5 + 1.5 * t),
                t * (0.5 + t * (2.0 - 1.5 * t)), t * t * (-0.5 + 0.5 * t));
}

// The separable Catmull-Rom spline over texel centres at q (output pixels), clamped to the edge.
vec3 sample_previous_catmull_rom(vec2 q) {
    vec2 s = q - 0.5;
    vec2 f0 = floor(s);
    vec4 wx = catmull_rom_weights(s.x - f0.x);
    vec4 wy = catmull_rom_weights(s.y - f0.y);
    ivec2 i0 = ivec2(f0) - 1;
    vec3 sum = vec3(0.0);
    for (int j = 0; j < 4; j++) {
        vec3 row = vec3(0.0);
        for (int i = 0; i < 4; i++) {
            row += wx[i] * previous(i0 + ivec2(i, j));
        }
        sum += wy[j] * row;
    }
    return sum;
}

// ONNX Resize linear, half_pixel, x2 of the colour at output pixel o (the reset history).
vec3 bilinear_color(ivec2 o, ivec2 size) {
    vec2 s = max((vec2(o) + 0.5) * 0.5 - 0.5, vec2(0.0));
    vec2 f0 = floor(s);
    vec2 w = s - f0;
    ivec2 i0 = ivec2(f0);
    ivec2 i1 = min(i0 + 1, size - 1);
    vec3 a = mix(texelFetch(color_in, i0, 0).rgb, texelFetch(color_in, ivec2(i1.x, i0.y), 0).rgb, w.x);
    vec3 b = mix(texelFetch(color_in, ivec2(i0.x, i1.y), 0).rgb, texelFetch(color_in, i1, 0).rgb, w.x);
    return mix(a, b, w.y);
}

void main() {
    ivec2 size = textureSize(color_in, 0);
    g_out_size = 2 * size;
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) {
        return;
    }
    uint plane = uint(size.x * size.y);
    uint i = uint(p.y * size.x + p.x);
    vec3 c = texelFetch(color_in, p, 0).rgb;
    inputs_t[COLOR * plane + i] = sfp(c.r);
    inputs_t[(COLOR + 1u) * plane + i] = sfp(c.g);
    inputs_t[(COLOR + 2u) * plane + i] = sfp(c.b);
    float depth = 0.0;
    vec2 motion_here = vec2(0.0);
    if (pc.has_motion != 0u) {
        depth = texelFetch(depth_in, p, 0).r;
        motion_here = texelFetch(motion_in, p, 0).rg;
    }
    // A frame without history is a sequence's first: no motion (whatever ended the history).
    bool warp = pc.reset == 0u && pc.has_motion != 0u;
    vec2 motion_in_model = warp ? motion_here : vec2(0.0);
    inputs_t[DEPTH * plane + i] = sfp(depth);
    inputs_t[MOTION * plane + i] = sfp(motion_in_model.x);
    inputs_t[(MOTION + 1u) * plane + i] = sfp(motion_in_model.y);
    inputs_t[JITTER * plane + i] = sfp(pc.jitter.x);
    inputs_t[(JITTER + 1u) * plane + i] = sfp(pc.jitter.y);

    vec3 lo = c, hi = c;
    if (warp && CLAMP_HISTORY) {
        for (int dy = -1; dy <= 1; dy++) {
            for (int dx = -1; dx <= 1; dx++) {
                vec3 n = texelFetch(color_in, clamp(p + ivec2(dx, dy), ivec2(0), size - 1), 0).rgb;
                lo = min(lo, n);
                hi = max(hi, n);
            }
        }
    }
    const float RATIO = 0.5;
    for (int sub = 0; sub < 4; sub++) {
        ivec2 d = ivec2(sub & 1, sub >> 1);
        ivec2 o = 2 * p + d;
        vec3 h;
        if (warp) {
            vec2 centre = vec2(o) + 0.5;
            ivec2 k = clamp(ivec2(floor(centre * RATIO + pc.jitter)), ivec2(0), size - 1);
            vec2 m = texelFetch(motion_in, k, 0).rg;
            h = CATMULL_ROM ? sample_previous_catmull_rom(centre - m / RATIO)
                            : sample_previous(centre - m / RATIO);
            if (CLAMP_HISTORY) {
                h = clamp(h, lo, hi);
            }
        } else {
            h = bilinear_color(o, size);
        }
        for (int ch = 0; ch < 3; ch++) {
            uint k = uint(ch * 4 + sub);
            inputs_t[(HISTORY + k) * plane + i] = sfp(h[ch]);
            if (WRITE_WARPED) {
                warped_t[k * plane + i] = sfp(h[ch]);
            }
        }
    }
}
