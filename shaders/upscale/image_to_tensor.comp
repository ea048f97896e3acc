#version 450
// The low-resolution frame → the model's input tensor: NCHW float32, planar RGB in 0..1, written
// straight into the tensor's memory (no host conversion). texelFetch of an RGBA8 UNORM image
// returns c / 255, the same value the CPU path computes.
layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0) uniform sampler2D frame;
layout(set = 0, binding = 1, std430) writeonly buffer Tensor { float values[]; } tensor;

void main() {
    ivec2 size = textureSize(frame, 0);
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) {
        return;
    }
    vec3 c = texelFetch(frame, p, 0).rgb;
    int plane = size.x * size.y;
    int i = p.y * size.x + p.x;
    tensor.values[i] = c.r;
    tensor.values[plane + i] = c.g;
    tensor.values[2 * plane + i] = c.b;
}
