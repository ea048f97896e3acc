#version 450
// The non-ML baseline: each output pixel samples the low-resolution frame with the hardware's
// bilinear filter at the output pixel's centre.
layout(local_size_x = 8, local_size_y = 8) in;

layout(set = 0, binding = 0) uniform sampler2D low_res;
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D upscaled;

void main() {
    ivec2 size = imageSize(upscaled);
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) {
        return;
    }
    vec2 uv = (vec2(p) + 0.5) / vec2(size);
    imageStore(upscaled, p, vec4(texture(low_res, uv).rgb, 1.0));
}
