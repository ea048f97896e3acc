#version 450
// The model's output tensor (NCHW float32, planar RGB) → the upscaled RGBA8 image. Values are
// clamped to 0..1; the UNORM store rounds to the nearest of the 256 levels, as the CPU path does.
layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0, std430) readonly buffer Tensor { float values[]; } tensor;
layout(set = 0, binding = 1, rgba8) uniform writeonly image2D upscaled;

void main() {
    ivec2 size = imageSize(upscaled);
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    if (p.x >= size.x || p.y >= size.y) {
        return;
    }
    int plane = size.x * size.y;
    int i = p.y * size.x + p.x;
    vec3 c = vec3(tensor.values[i], tensor.values[plane + i], tensor.values[2 * plane + i]);
    imageStore(upscaled, p, vec4(clamp(c, 0.0, 1.0), 1.0));
}
