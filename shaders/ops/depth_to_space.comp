#version 450
// variants: FP16
// DepthToSpace: each output element picks its source channel by block offset. CRD (PyTorch's
// PixelShuffle) takes channel c*b*b + i*b + j; DCR (ONNX's default) (i*b + j)*C + c.
#include "ops/precision.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const bool CRD = false;

layout(set = 0, binding = 0) readonly buffer X { sfp x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { sfp y[]; };

layout(push_constant) uniform Push {
    uint out_c;
    uint in_h;
    uint in_w;
    uint block;
    uint count;
} p;

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= p.count) {
        return;
    }
    uint b = p.block;
    uint out_w = p.in_w * b;
    uint out_h = p.in_h * b;
    uint ox = i % out_w;
    uint oy = (i / out_w) % out_h;
    uint c = (i / (out_w * out_h)) % p.out_c;
    uint n = i / (out_w * out_h * p.out_c);
    uint bi = oy % b;
    uint bj = ox % b;
    uint ic = CRD ? (c * b * b + bi * b + bj) : ((bi * b + bj) * p.out_c + c);
    uint in_c = p.out_c * b * b;
    y[i] = x[((n * in_c + ic) * p.in_h + oy / b) * p.in_w + ox / b];
}
