#version 450
// variants: FP16
// Element-wise Add, Sub, Mul, Div, PRelu with numpy broadcasting (OP selects). Shapes are
// padded to rank 4 on the host; a broadcast dimension has stride 0 in its operand.
#include "ops/precision.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;

layout(set = 0, binding = 0) readonly buffer A { sfp a[]; };
layout(set = 0, binding = 1) readonly buffer B { sfp b[]; };
layout(set = 0, binding = 2) writeonly buffer Y { sfp y[]; };

layout(push_constant) uniform Push {
    uvec4 dims;
    uvec4 a_strides;
    uvec4 b_strides;
    uint count;
} p;

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= p.count) {
        return;
    }
    uint rest = i;
    uint ia = 0u;
    uint ib = 0u;
    for (int d = 3; d >= 0; --d) {
        uint c = rest % p.dims[d];
        rest /= p.dims[d];
        ia += c * p.a_strides[d];
        ib += c * p.b_strides[d];
    }
    float va = float(a[ia]);
    float vb = float(b[ib]);
    float r;
    switch (OP) {
    case 0u: r = va + vb; break;
    case 1u: r = va - vb; break;
    case 2u: r = va * vb; break;
    case 3u: r = va / vb; break;
    default: r = va < 0.0 ? va * vb : va; break;
    }
    y[i] = sfp(r);
}
