#version 450
// variants: FP16
// Element-wise activation (Relu, LeakyRelu, Clip, Sigmoid, Tanh) of a tensor that no Conv
// could absorb; KIND selects the function.
#include "ops/precision.glsl"
#include "ops/activation.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = 0u;

layout(set = 0, binding = 0) readonly buffer X { sfp x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { sfp y[]; };

layout(push_constant) uniform Push {
    uint count;
    float alpha;
    float beta;
} p;

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= p.count) {
        return;
    }
    y[i] = sfp(activate(KIND, float(x[i]), p.alpha, p.beta));
}
