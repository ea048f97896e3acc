#version 450
#include "render/common.glsl"

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

layout(set = 0, binding = 0) uniform sampler2D upscaled;

layout(push_constant) uniform Push {
    // 1 when the target format encodes sRGB itself: hand it linear values.
    uint srgb_target;
} pc;

void main() {
    vec3 c = texture(upscaled, uv).rgb;
    color = vec4(pc.srgb_target == 1u ? srgb_decode(c) : c, 1.0);
}
