#version 450
// variants: FP16
// In-stream post-process of a temporal model: the output tensor (planar NCHW) → the upscaled
// RGBA8 image, quantised as `instream_post.comp` does, and the same 8-bit values packed into
// the history buffer the next frame's `temporal_pre.comp` warps.
#include "ops/precision.glsl"
layout(local_size_x = 16, local_size_y = 8) in;

layout(set = 0, binding = 0) readonly buffer Tensor { sfp t[]; };
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D upscaled;
layout(set = 0, binding = 2) writeonly buffer History { uint history_out[]; };

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
    history_out[i] = packUnorm4x8(vec4(q, 1.0));
}
