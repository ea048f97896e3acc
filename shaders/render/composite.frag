#version 450
#include "render/common.glsl"
#include "render/debug_view.glsl"

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

layout(set = 0, binding = 0) uniform sampler2D upscaled;
// The compare view's right side (the same image as `upscaled` when the view is off).
layout(set = 0, binding = 1) uniform sampler2D right_side;

layout(push_constant) uniform Push {
    // 1 when the target format encodes sRGB itself: hand it linear values.
    uint srgb_target;
    // Left of this (0..1 across the image) shows `upscaled`, right of it `right_side`.
    float divider;
    // DEBUG_OFF, or a debug view of the image bound as `upscaled` (debug_view.glsl).
    uint mode;
    float near;
    float far;
} pc;

void main() {
    vec3 c = uv.x < pc.divider ? texture(upscaled, uv).rgb : texture(right_side, uv).rgb;
    if (pc.mode != DEBUG_OFF) {
        c = debug_colour(pc.mode, texture(upscaled, uv), pc.near, pc.far);
    }
    color = vec4(pc.srgb_target == 1u ? srgb_decode(c) : c, 1.0);
}
