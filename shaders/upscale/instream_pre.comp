#version 450
// variants: FP16
// In-stream pre-process: the low-resolution frame (RGBA8 UNORM, sampled) → the model's input
// tensor, planar NCHW f32 in 0..1 (texelFetch of UNORM gives value/255, as the CPU path's
// `rgba8_to_nchw`).
#include "ops/precision.glsl"
layout(local_size_x = 16, local_size_y = 8) in;

layout(set = 0, binding = 0) uniform sampler2D frame;
layout(set = 0, binding = 1) writeonly buffer Tensor { sfp t[]; };

void main() {
    ivec2 size = textureSize(frame, 0);
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) {
        return;
    }
    vec3 c = texelFetch(frame, p, 0).rgb;
    uint plane = uint(size.x * size.y);
    uint i = uint(p.y * size.x + p.x);
    t[i] = sfp(c.r);
    t[plane + i] = sfp(c.g);
    t[2u * plane + i] = sfp(c.b);
}
