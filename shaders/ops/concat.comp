#version 450
// variants: FP16
// Copies one Concat input into its slice of the output. Tensors are viewed as
// [outer][axis][inner]; the op runs one dispatch per input (barriers between them keep the
// writes to the shared output buffer ordered).
#include "ops/precision.glsl"
layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer X { sfp x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { sfp y[]; };

layout(push_constant) uniform Push {
    uint axis_in;
    uint axis_out;
    uint offset;
    uint inner;
    uint count;
} p;

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= p.count) {
        return;
    }
    uint n = i % p.inner;
    uint a = (i / p.inner) % p.axis_in;
    uint o = i / (p.inner * p.axis_in);
    y[(o * p.axis_out + p.offset + a) * p.inner + n] = x[i];
}
