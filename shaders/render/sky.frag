#version 450
// variants: NO_MOTION
// NO_MOTION: no motion output, for the scene pass's frames whose motion attachment is unused
// (its format VK_FORMAT_UNDEFINED in the pipeline: src/render/scene.rs).
#include "render/common.glsl"
#include "render/scene_output.glsl"
#define MOTION_BINDING 0
#include "render/scene_motion.glsl"

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;
#ifndef NO_MOTION
layout(location = 1) out vec2 motion;
#endif

layout(push_constant) uniform Push {
    mat4 inv_view_proj;
    vec4 sun;
} pc;

void main() {
    vec4 far = pc.inv_view_proj * vec4(uv * 2.0 - 1.0, 1.0, 1.0);
    vec4 near = pc.inv_view_proj * vec4(uv * 2.0 - 1.0, 0.0, 1.0);
    vec3 dir = normalize(far.xyz / far.w - near.xyz / near.w);
    vec3 c = sky_color(dir, pc.sun.xyz);
    // Thin high-altitude bands: fine detail in the background too.
    float bands = smoothstep(0.92, 1.0, sin(dir.y * 180.0 + dir.x * 40.0)) * smoothstep(0.05, 0.4, dir.y);
    c = mix(c, vec3(0.95), bands * 0.25);
    color = scene_output(c);
    // The sky is at infinity: only the camera's rotation moves it (w = 0 drops translation).
#ifndef NO_MOTION
    motion = motion_pixels(scene_motion.view_proj * vec4(dir, 0.0),
                           scene_motion.prev_view_proj * vec4(dir, 0.0));
#endif
}
