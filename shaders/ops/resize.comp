#version 450
// variants: FP16
// Resize of the two spatial axes of an NCHW tensor, nearest or (bi)linear. COORD is ONNX's
// coordinate_transformation_mode, ROUND its nearest_mode (numbers as in resize.rs).
#include "ops/precision.glsl"
#include "ops/resize_coord.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const bool LINEAR = false;
layout(constant_id = 1) const uint COORD = 0u;
layout(constant_id = 2) const uint ROUND = 0u;

layout(set = 0, binding = 0) readonly buffer X { sfp x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { sfp y[]; };

layout(push_constant) uniform Push {
    uint in_h;
    uint in_w;
    uint out_h;
    uint out_w;
    float scale_h;
    float scale_w;
    uint count;
} p;

uint nearest(float s, uint len) {
    float r;
    switch (ROUND) {
    case 1u: r = floor(s + 0.5); break; // round_prefer_ceil
    case 2u: r = floor(s); break;
    case 3u: r = ceil(s); break;
    default: r = (s - floor(s) == 0.5) ? floor(s) : floor(s + 0.5); break; // round_prefer_floor
    }
    return uint(clamp(r, 0.0, float(len - 1u)));
}

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= p.count) {
        return;
    }
    uint ox = i % p.out_w;
    uint oy = (i / p.out_w) % p.out_h;
    uint plane = (i / (p.out_w * p.out_h)) * p.in_h * p.in_w;
    float sy = resize_source(COORD, oy, p.scale_h, p.in_h, p.out_h);
    float sx = resize_source(COORD, ox, p.scale_w, p.in_w, p.out_w);
    if (!LINEAR) {
        y[i] = x[plane + nearest(sy, p.in_h) * p.in_w + nearest(sx, p.in_w)];
        return;
    }
    sy = clamp(sy, 0.0, float(p.in_h - 1u));
    sx = clamp(sx, 0.0, float(p.in_w - 1u));
    uint y0 = uint(sy);
    uint x0 = uint(sx);
    uint y1 = min(y0 + 1u, p.in_h - 1u);
    uint x1 = min(x0 + 1u, p.in_w - 1u);
    float ty = sy - float(y0);
    float tx = sx - float(x0);
    float top = mix(float(x[plane + y0 * p.in_w + x0]), float(x[plane + y0 * p.in_w + x1]), tx);
    float bottom = mix(float(x[plane + y1 * p.in_w + x0]), float(x[plane + y1 * p.in_w + x1]), tx);
    y[i] = sfp(mix(top, bottom, ty));
}
