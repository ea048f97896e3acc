#version 450

#define MOTION_BINDING 1
#include "render/scene_motion.glsl"

layout(location = 0) in vec3 in_pos;
layout(location = 1) in vec3 in_normal;
layout(location = 2) in vec2 in_uv;
layout(location = 3) in vec4 in_color; // rgb tint, w = texture layer

layout(push_constant) uniform Push {
    mat4 mvp;           // jittered: where the frame samples
    vec4 model_rows[3]; // the model matrix's top three rows (affine)
    vec4 params;        // x = emissive, yzw = direction toward the sun
} pc;

layout(location = 0) out vec3 normal;
layout(location = 1) out vec2 uv;
layout(location = 2) out vec4 tint;
layout(location = 3) out float view_depth;
// This vertex now and in the previous frame, unjittered; divided per fragment.
layout(location = 4) out vec4 cur_clip;
layout(location = 5) out vec4 prev_clip;

void main() {
    vec4 p = vec4(in_pos, 1.0);
    mat3 m = mat3(pc.model_rows[0].xyz, pc.model_rows[1].xyz, pc.model_rows[2].xyz);
    // Rows were uploaded, so transpose to apply; uniform scale keeps this a valid normal matrix.
    normal = normalize(transpose(m) * in_normal);
    uv = in_uv;
    tint = in_color;
    gl_Position = pc.mvp * p;
    view_depth = gl_Position.w;
    // The scene pass records draw i with first instance i.
    cur_clip = scene_motion.draws[gl_InstanceIndex].mvp * p;
    prev_clip = scene_motion.draws[gl_InstanceIndex].prev_mvp * p;
}
