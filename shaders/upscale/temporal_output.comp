#version 450
// Shared-memory post-process of a temporal model: ONNX Runtime ran the whole graph (the history
// Add and DepthToSpace included), so its output tensor (NCHW float32 at output size) is the
// output. Quantised to 8 bits into the upscaled image as `temporal_post.comp` does; clamped to
// 0..1 and rounded to fp16 (round to nearest even) into the history buffer `temporal_pre.comp`
// warps next frame.
layout(local_size_x = 16, local_size_y = 8) in;

layout(set = 0, binding = 0) readonly buffer Output { float out_t[]; };
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D upscaled;
layout(set = 0, binding = 2) writeonly buffer History { uvec2 history_out[]; };

void main() {
    ivec2 size = imageSize(upscaled);
    ivec2 o = ivec2(gl_GlobalInvocationID.xy);
    if (o.x >= size.x || o.y >= size.y) {
        return;
    }
    uint plane = uint(size.x * size.y);
    uint i = uint(o.y * size.x + o.x);
    vec3 c = clamp(vec3(out_t[i], out_t[plane + i], out_t[2u * plane + i]), 0.0, 1.0);
    vec3 q = floor(c * 255.0 + 0.5) / 255.0;
    imageStore(upscaled, o, vec4(q, 1.0));
    history_out[i] = uvec2(packHalf2x16(c.rg), packHalf2x16(vec2(c.b, 1.0)));
}
