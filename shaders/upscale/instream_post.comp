#version 450
// variants: FP16
// In-stream post-process: the model's output tensor (planar NCHW f32) → the upscaled RGBA8
// storage image, clamped to 0..1. Quantised here as the CPU path's `nchw_to_rgba8` does
// (round half up), so the store's own float → UNORM rounding cannot differ from it.
#include "ops/precision.glsl"
layout(local_size_x = 16, local_size_y = 8) in;

layout(set = 0, binding = 0) readonly buffer Tensor { sfp t[]; };
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D upscaled;

void main() {
    ivec2 size = imageSize(upscaled);
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) {
        return;
    }
    uint plane = uint(size.x * size.y);
    uint i = uint(p.y * size.x + p.x);
    vec3 v = vec3(float(t[i]), float(t[plane + i]), float(t[2u * plane + i]));
    vec3 q = floor(clamp(v, 0.0, 1.0) * 255.0 + 0.5) / 255.0;
    imageStore(upscaled, p, vec4(q, 1.0));
}
