#version 450
// Live PSNR of the compare view: per 16x16 tile, the sum of squared luma differences between the
// current output and the native-resolution frame (and, when the right side is an upscaler, of
// the right image too). Values are quantised to 8 bits first and luma is BT.601 on the encoded
// values, exactly as `quality` computes it on PNGs; the host sums the tiles in f64.
// The same pass writes the error heatmap the compare view's right side can show: the current
// output's |luma - native luma| times `gain`, false-coloured (black where they are equal).
layout(local_size_x = 16, local_size_y = 16) in;

layout(set = 0, binding = 0, rgba8) uniform readonly image2D current;
layout(set = 0, binding = 1, rgba8) uniform readonly image2D right;
layout(set = 0, binding = 2) uniform sampler2D native_frame;
layout(set = 0, binding = 3, std430) writeonly buffer Partials {
    vec2 partial[];
};
layout(set = 0, binding = 4, rgba8) uniform writeonly image2D heatmap;

layout(push_constant) uniform Push {
    uint has_right;
    /// Heatmap amplification: |dY| * gain / 255 = 1 is full scale.
    float gain;
} pc;

const vec3 LUMA = vec3(0.299, 0.587, 0.114);

// Black -> purple -> red -> orange -> pale yellow over t = 0..1 (an inferno-like ramp: zero
// error is black, brightness grows with the error).
vec3 heat_colour(float t) {
    const vec3 stops[5] = vec3[5](
        vec3(0.0), vec3(0.34, 0.06, 0.52), vec3(0.85, 0.21, 0.28),
        vec3(0.99, 0.60, 0.07), vec3(0.99, 1.0, 0.75));
    float x = clamp(t, 0.0, 1.0) * 4.0;
    int i = min(int(x), 3);
    return mix(stops[i], stops[i + 1], x - float(i));
}

shared vec2 sums[256];

void main() {
    ivec2 size = imageSize(current);
    ivec2 p = ivec2(gl_GlobalInvocationID.xy);
    vec2 e = vec2(0.0);
    if (p.x < size.x && p.y < size.y) {
        vec3 n = round(texelFetch(native_frame, p, 0).rgb * 255.0);
        float d = dot(round(imageLoad(current, p).rgb * 255.0) - n, LUMA);
        e.x = d * d;
        imageStore(heatmap, p, vec4(heat_colour(abs(d) * pc.gain / 255.0), 1.0));
        if (pc.has_right != 0u) {
            float r = dot(round(imageLoad(right, p).rgb * 255.0) - n, LUMA);
            e.y = r * r;
        }
    }
    uint i = gl_LocalInvocationIndex;
    sums[i] = e;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1u) {
        if (i < s) {
            sums[i] += sums[i + s];
        }
        barrier();
    }
    if (i == 0u) {
        partial[gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x] = sums[0];
    }
}
