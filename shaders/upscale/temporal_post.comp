#version 450
// variants: FP16
// In-stream post-process of a temporal model: the graph's last two nodes, then the image. Per
// output pixel o = (2x + j, 2y + i), colour c: channel c*4 + i*2 + j of render pixel (x, y) of
// the warped history (`temporal_pre.comp`) plus the network's correction is the output
// (Add(history, x), DepthToSpace CRD 2). Quantised to 8 bits as `instream_post.comp` does, it
// goes into the upscaled image; clamped to 0..1 and rounded to fp16 (round to nearest even), into
// the history buffer the next frame warps.
#include "ops/precision.glsl"
layout(local_size_x = 16, local_size_y = 8) in;

layout(set = 0, binding = 0) readonly buffer Correction { sfp x_t[]; };
layout(set = 0, binding = 1) readonly buffer Warped { sfp warped_t[]; };
layout(set = 0, binding = 2, rgba8) uniform writeonly image2D upscaled;
layout(set = 0, binding = 3) writeonly buffer History { uvec2 history_out[]; };

void main() {
    ivec2 size = imageSize(upscaled);
    ivec2 o = ivec2(gl_GlobalInvocationID.xy);
    if (o.x >= size.x || o.y >= size.y) {
        return;
    }
    ivec2 render = size / 2;
    ivec2 p = o / 2;
    uint sub = uint((o.y & 1) * 2 + (o.x & 1));
    uint plane = uint(render.x * render.y);
    uint i = uint(p.y * render.x + p.x);
    vec3 v;
    for (int c = 0; c < 3; c++) {
        uint k = (uint(c) * 4u + sub) * plane + i;
        v[c] = float(warped_t[k]) + float(x_t[k]);
    }
    vec3 c = clamp(v, 0.0, 1.0);
    vec3 q = floor(c * 255.0 + 0.5) / 255.0;
    imageStore(upscaled, o, vec4(q, 1.0));
    history_out[o.y * size.x + o.x] = uvec2(packHalf2x16(c.rg), packHalf2x16(vec2(c.b, 1.0)));
}
