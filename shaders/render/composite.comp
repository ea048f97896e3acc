#version 450
// The composite as a compute pass, for targets that take storage writes (the headless and
// bench target): what composite.frag draws, one invocation per target pixel, the letterbox
// bars written black. A GPU whose raster units are few (a data-centre part) runs a
// full-screen fragment pass on a small part of the chip; a compute pass uses all of it.
#include "render/common.glsl"
#include "render/debug_view.glsl"

layout(local_size_x = 16, local_size_y = 8) in;

layout(set = 0, binding = 0) uniform sampler2D upscaled;
// The compare view's right side (the same image as `upscaled` when the view is off).
layout(set = 0, binding = 1) uniform sampler2D right_side;
layout(set = 0, binding = 2, rgba8) uniform writeonly image2D target;

layout(push_constant) uniform Push {
    // The picture's rectangle in the target (the letterbox).
    ivec2 offset;
    uvec2 extent;
    uvec2 target_size;
    // Left of this (0..1 across the picture) shows `upscaled`, right of it `right_side`.
    float divider;
    // DEBUG_OFF, or a debug view of the image bound as `upscaled` (debug_view.glsl).
    uint mode;
    float near;
    float far;
} pc;

void main() {
    uvec2 p = gl_GlobalInvocationID.xy;
    if (p.x >= pc.target_size.x || p.y >= pc.target_size.y) {
        return;
    }
    ivec2 local = ivec2(p) - pc.offset;
    vec4 color = vec4(0.0, 0.0, 0.0, 1.0);
    if (all(greaterThanEqual(local, ivec2(0))) && all(lessThan(local, ivec2(pc.extent)))) {
        // The fragment pass's uv at this pixel's centre.
        vec2 uv = (vec2(local) + 0.5) / vec2(pc.extent);
        vec3 c = uv.x < pc.divider ? textureLod(upscaled, uv, 0.0).rgb
                                   : textureLod(right_side, uv, 0.0).rgb;
        if (pc.mode != DEBUG_OFF) {
            c = debug_colour(pc.mode, textureLod(upscaled, uv, 0.0), pc.near, pc.far);
        }
        color = vec4(c, 1.0);
    }
    imageStore(target, ivec2(p), color);
}
