#version 450
// The temporal upscaler's accumulation pass (`src/upscale/taau.rs` numbers the steps): one
// invocation per output pixel reconstructs this frame's jittered sample, reprojects the history
// with the dilated motion vector, rejects stale history (neighbourhood clip in YCoCg, depth
// disocclusion) and blends. It writes the new, unsharpened history; `taau_sharpen.comp` turns
// it into the output.
//
// Spaces: render pixels (p, k) are the low-resolution frame's, unjittered unless said; the render
// pixel k holds the scene point at unjittered position k + 0.5 - jitter (the projection moved
// the picture by +jitter). Output pixels o have centres at o + 0.5; in render pixels that is
// (o + 0.5) * ratio, ratio = render / output.
layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) uniform sampler2D color_in;
layout(set = 0, binding = 1) uniform sampler2D depth_in;
layout(set = 0, binding = 2) uniform sampler2D motion_in;
// The previous frame's history: rgb (display-encoded, unsharpened), a = accumulated weight.
// Sampled with a linear filter (Catmull-Rom from five bilinear taps).
layout(set = 0, binding = 3) uniform sampler2D history_in;
// The previous frame's linear view depth per output pixel (nearest-depth of its 3x3).
layout(set = 0, binding = 4) uniform sampler2D history_depth_in;
layout(set = 0, binding = 5, rgba16f) uniform writeonly image2D history_out;
layout(set = 0, binding = 6, r32f) uniform writeonly image2D history_depth_out;

layout(push_constant) uniform Push {
    // This frame's sub-pixel offset, render pixels (+x right, +y down).
    vec2 jitter;
    // The projection's near and far planes (depth 0 = near, 1 = far), for linear depth.
    float near_plane;
    float far_plane;
    // 1: ignore the history (reset, or no motion and depth given).
    uint reset;
} pc;

// Reconstruction kernels, Gaussian in the squared distance: SHARP over output pixels (sigma 0.5
// output px) for the sample accumulated into history; SMOOTH over render pixels (sigma 0.5
// render px) for the frame that starts a history, which has only this frame's samples.
const float SHARP = 2.0;
const float SMOOTH = 2.0;
// The most weight the history carries: the newest frame's share never falls below
// confidence / (cap + confidence). A still pixel keeps up to STILL_WEIGHT (a share of at least
// 1/7 for a sample at the pixel's centre); a pixel moving MOVING_PX output pixels a frame or
// more keeps MOVING_WEIGHT (1/3): each reprojection resamples, and blurs, the history, so on
// the scripted path a short history scores better (PSNR-Y 27.3 dB against 26.1 with 9 for
// every pixel, 160x90 -> 320x180).
const float STILL_WEIGHT = 6.0;
const float MOVING_WEIGHT = 2.0;
const float MOVING_PX = 0.25;
// The weight of a frame that starts a history (its smooth reconstruction).
const float START_WEIGHT = 1.0;
// History whose depth is nearer than this fraction of the current depth was an occluder that
// has moved away (disocclusion).
const float DEPTH_TOLERANCE = 0.1;

// The render-pixel tile a 16x16 group of output pixels reads: for ratio <= 1 the nearest render
// pixels of the group span at most 16 + 1, plus one on each side for the 3x3.
const int TILE = 18;
shared vec3 s_color[TILE][TILE];
shared float s_depth[TILE][TILE];
shared vec2 s_motion[TILE][TILE];

vec3 rgb_to_ycocg(vec3 c) {
    return vec3(0.25 * c.r + 0.5 * c.g + 0.25 * c.b, 0.5 * c.r - 0.5 * c.b,
                -0.25 * c.r + 0.5 * c.g - 0.25 * c.b);
}

vec3 ycocg_to_rgb(vec3 c) {
    return vec3(c.x + c.y - c.z, c.x + c.z, c.x - c.y - c.z);
}

float linear_depth(float d) {
    return pc.near_plane * pc.far_plane / (pc.far_plane - d * (pc.far_plane - pc.near_plane));
}

// Catmull-Rom resampling of the history at uv from five bilinear taps (the corner taps, whose
// weights are small, are left out).
vec4 history_catmull_rom(vec2 uv, vec2 size) {
    vec2 pos = uv * size;
    vec2 tc1 = floor(pos - 0.5) + 0.5;
    vec2 f = pos - tc1;
    vec2 w0 = f * (-0.5 + f * (1.0 - 0.5 * f));
    vec2 w1 = 1.0 + f * f * (-2.5 + 1.5 * f);
    vec2 w2 = f * (0.5 + f * (2.0 - 1.5 * f));
    vec2 w3 = f * f * (-0.5 + 0.5 * f);
    vec2 w12 = w1 + w2;
    vec2 tc0 = (tc1 - 1.0) / size;
    vec2 tc3 = (tc1 + 2.0) / size;
    vec2 tc12 = (tc1 + w2 / w12) / size;
    float wa = w12.x * w0.y, wb = w0.x * w12.y, wc = w12.x * w12.y, wd = w3.x * w12.y,
          we = w12.x * w3.y;
    vec4 sum = texture(history_in, vec2(tc12.x, tc0.y)) * wa
             + texture(history_in, vec2(tc0.x, tc12.y)) * wb
             + texture(history_in, tc12) * wc
             + texture(history_in, vec2(tc3.x, tc12.y)) * wd
             + texture(history_in, vec2(tc12.x, tc3.y)) * we;
    return sum / (wa + wb + wc + wd + we);
}

// Moves `history` toward `mean` until it lies inside the box [lo, hi] (YCoCg).
vec3 clip_to_box(vec3 history, vec3 mean, vec3 lo, vec3 hi) {
    vec3 extent = max(0.5 * (hi - lo), vec3(1e-5));
    vec3 centre = 0.5 * (hi + lo);
    vec3 v = history - centre;
    vec3 units = abs(v / extent);
    float m = max(units.x, max(units.y, units.z));
    return m > 1.0 ? centre + v / m : history;
}

void main() {
    ivec2 out_size = imageSize(history_out);
    ivec2 in_size = textureSize(color_in, 0);
    vec2 ratio = vec2(in_size) / vec2(out_size);
    ivec2 o = ivec2(gl_GlobalInvocationID.xy);

    // The group's render tile: from one pixel before the nearest render pixel of its first
    // output pixel. Clamped reads repeat the border.
    vec2 group_origin = vec2(gl_WorkGroupID.xy * gl_WorkGroupSize.xy);
    ivec2 base = ivec2(floor((group_origin + 0.5) * ratio + pc.jitter)) - 1;
    // Only the part this ratio needs (12x12 at x2): the nearest render pixels span at most
    // ceil(15 * ratio) + 1, plus the 3x3's border, plus one for rounding.
    ivec2 tile = min(ivec2(ceil(15.0 * ratio)) + 4, ivec2(TILE));
    uint count = uint(tile.x * tile.y);
    for (uint i = gl_LocalInvocationIndex; i < count; i += 256) {
        ivec2 t = ivec2(int(i) % tile.x, int(i) / tile.x);
        ivec2 k = clamp(base + t, ivec2(0), in_size - 1);
        s_color[t.y][t.x] = rgb_to_ycocg(texelFetch(color_in, k, 0).rgb);
        s_depth[t.y][t.x] = texelFetch(depth_in, k, 0).r;
        s_motion[t.y][t.x] = texelFetch(motion_in, k, 0).rg;
    }
    barrier();
    if (o.x >= out_size.x || o.y >= out_size.y) {
        return;
    }

    // (a) This frame's sample: the 3x3 render pixels around the one nearest the output pixel's
    // centre, each weighted by its sample's distance to that centre.
    vec2 p = (vec2(o) + 0.5) * ratio;
    ivec2 k0 = ivec2(floor(p + pc.jitter));
    ivec2 t0 = k0 - base;
    vec3 sharp = vec3(0.0), smooth_sum = vec3(0.0);
    float sharp_w = 0.0, smooth_w = 0.0, confidence = 0.0;
    vec3 lo = vec3(1e9), hi = vec3(-1e9), mean = vec3(0.0);
    float nearest = 2.0;
    ivec2 nearest_t = t0;
    for (int dy = -1; dy <= 1; dy++) {
        for (int dx = -1; dx <= 1; dx++) {
            ivec2 t = t0 + ivec2(dx, dy);
            vec3 c = s_color[t.y][t.x];
            vec2 d_render = vec2(k0 + ivec2(dx, dy)) + 0.5 - pc.jitter - p;
            vec2 d_out = d_render / ratio;
            float w = exp(-SHARP * dot(d_out, d_out));
            float ws = exp(-SMOOTH * dot(d_render, d_render));
            sharp += c * w;
            sharp_w += w;
            smooth_sum += c * ws;
            smooth_w += ws;
            confidence = max(confidence, w);
            lo = min(lo, c);
            hi = max(hi, c);
            mean += c;
            float z = s_depth[t.y][t.x];
            if (z < nearest) {
                nearest = z;
                nearest_t = t;
            }
        }
    }
    sharp /= sharp_w;
    mean /= 9.0;
    float depth_now = linear_depth(nearest);

    // (b) Reproject with the motion of the nearest surface in the 3x3 (dilated motion: edges of
    // a moving object carry its motion, not the background's).
    vec2 motion = s_motion[nearest_t.y][nearest_t.x];
    vec2 uv_prev = (p - motion) / vec2(in_size);
    bool on_screen = all(greaterThanEqual(uv_prev, vec2(0.0))) &&
                     all(lessThanEqual(uv_prev, vec2(1.0)));
    float moving = clamp(length(motion / ratio) / MOVING_PX, 0.0, 1.0);
    float cap = mix(STILL_WEIGHT, MOVING_WEIGHT, moving);
    float history_weight = 0.0;
    vec3 history = vec3(0.0);
    if (pc.reset == 0u && on_screen) {
        vec4 h = history_catmull_rom(uv_prev, vec2(out_size));
        // (c) Disocclusion: the history there saw a nearer surface, which has moved away.
        ivec2 prev_px = clamp(ivec2(uv_prev * vec2(out_size)), ivec2(0), out_size - 1);
        float depth_prev = texelFetch(history_depth_in, prev_px, 0).r;
        bool disoccluded = depth_prev < depth_now * (1.0 - DEPTH_TOLERANCE);
        if (!disoccluded) {
            // (c) Stale colour: clip toward this frame's neighbourhood box.
            history = clip_to_box(rgb_to_ycocg(max(h.rgb, vec3(0.0))), mean, lo, hi);
            history_weight = clamp(h.a, 0.0, cap);
        }
    }

    // (d) Accumulate: the new sample's share is its confidence over the total weight; no usable
    // history means this frame alone, reconstructed smoothly.
    vec3 result;
    float weight;
    if (history_weight > 0.0) {
        float alpha = confidence / (history_weight + confidence);
        result = mix(history, sharp, alpha);
        weight = min(history_weight + confidence, cap);
    } else {
        result = smooth_sum / smooth_w;
        weight = START_WEIGHT;
    }
    imageStore(history_out, o, vec4(max(ycocg_to_rgb(result), vec3(0.0)), weight));
    imageStore(history_depth_out, o, vec4(depth_now));
}
