#version 450
// variants: NO_MOTION
// NO_MOTION: no motion output, for the scene pass's frames whose motion attachment is unused
// (its format VK_FORMAT_UNDEFINED in the pipeline: src/render/scene.rs).
#include "render/common.glsl"
#include "render/scene_output.glsl"
#define MOTION_BINDING 1
#include "render/scene_motion.glsl"

layout(location = 0) in vec3 normal;
layout(location = 1) in vec2 uv;
layout(location = 2) in vec4 tint;
layout(location = 3) in float view_depth;
layout(location = 4) in vec4 cur_clip;
layout(location = 5) in vec4 prev_clip;

layout(set = 0, binding = 0) uniform sampler2DArray textures;

layout(push_constant) uniform Push {
    mat4 mvp;
    vec4 model_rows[3];
    vec4 params;
} pc;

layout(location = 0) out vec4 color;
#ifndef NO_MOTION
layout(location = 1) out vec2 motion;
#endif

void main() {
    vec3 albedo = texture(textures, vec3(uv, tint.w)).rgb * tint.rgb;
    vec3 n = normalize(normal);
    vec3 sun = pc.params.yzw;
    float diffuse = max(dot(n, sun), 0.0);
    // Hemisphere ambient: sky from above, warm bounce from the ground.
    vec3 ambient = mix(vec3(0.20, 0.18, 0.16), vec3(0.30, 0.36, 0.45), n.y * 0.5 + 0.5);
    vec3 lit = albedo * (ambient + vec3(1.0, 0.93, 0.82) * diffuse * 1.1);
    lit += tint.rgb * pc.params.x;
    float fog = 1.0 - exp(-max(view_depth - 20.0, 0.0) * 0.012);
    lit = mix(lit, vec3(0.62, 0.72, 0.85), fog);
    color = scene_output(lit);
#ifndef NO_MOTION
    motion = motion_pixels(cur_clip, prev_clip);
#endif
}
