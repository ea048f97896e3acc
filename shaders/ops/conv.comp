#version 450
// variants: FP16
// 2D convolution, NCHW, batch 1: any kernel size, stride, dilation, padding, groups (depthwise
// included), bias, and the following activation fused as an epilogue (ACT).
//
// A work group computes a TILE_W x TILE_H tile of output pixels for OC_BLOCK output channels of
// one group; each invocation owns one pixel and keeps OC_BLOCK sums in registers. Input
// channels are taken in chunks: the chunk's input tile (with its halo) and the block's weights
// are staged in shared memory, so each input value is read from global memory once per work
// group instead of once per tap and output channel. Weights are packed on the host as
// [group][oc block][ic][ky][kx][OC_BLOCK], so one tap's OC_BLOCK weights are two vec4 loads.
// When even one channel's tile does not fit (huge kernels or dilations), the host sets DIRECT
// and the taps are read from global memory instead.
#include "ops/precision.glsl"
#include "ops/activation.glsl"

layout(local_size_x = 16, local_size_y = 8) in;
layout(constant_id = 0) const uint ACT = 0u;
layout(constant_id = 1) const bool DIRECT = false;

const uint TILE_W = 16u;
const uint TILE_H = 8u;
const uint THREADS = TILE_W * TILE_H;
// Must match SMEM_INPUT / SMEM_WEIGHT_VEC4 in conv.rs.
const uint SMEM_INPUT = 2048u;
const uint SMEM_WEIGHT_VEC4 = 512u;

layout(set = 0, binding = 0) readonly buffer X { sfp x[]; };
layout(set = 0, binding = 1) readonly buffer W { sfpvec4 w[]; };
layout(set = 0, binding = 2) readonly buffer B { sfp bias[]; };
layout(set = 0, binding = 3) writeonly buffer Y { sfp y[]; };

layout(push_constant) uniform Push {
    uint in_h, in_w;
    uint out_c, out_h, out_w;
    uint kh, kw;
    int stride_y, stride_x, dil_y, dil_x, pad_top, pad_left;
    uint ic_per_group, oc_per_group, oc_blocks;
    uint ic_chunk, tile_in_h, tile_in_w;
    float alpha, beta;
} p;

shared float s_in[SMEM_INPUT];
shared vec4 s_w[SMEM_WEIGHT_VEC4];

vec4 acc0 = vec4(0.0);
vec4 acc1 = vec4(0.0);

void accumulate_direct(uint g, uint wbase, uint ox, uint oy) {
    uint taps = p.kh * p.kw;
    for (uint c = 0u; c < p.ic_per_group; ++c) {
        uint plane = (g * p.ic_per_group + c) * p.in_h * p.in_w;
        for (uint ky = 0u; ky < p.kh; ++ky) {
            int iy = int(oy) * p.stride_y - p.pad_top + int(ky) * p.dil_y;
            if (iy < 0 || iy >= int(p.in_h)) {
                continue;
            }
            for (uint kx = 0u; kx < p.kw; ++kx) {
                int ix = int(ox) * p.stride_x - p.pad_left + int(kx) * p.dil_x;
                if (ix < 0 || ix >= int(p.in_w)) {
                    continue;
                }
                float v = float(x[plane + uint(iy) * p.in_w + uint(ix)]);
                uint wi = wbase + ((c * taps) + ky * p.kw + kx) * 2u;
                acc0 += v * vec4(w[wi]);
                acc1 += v * vec4(w[wi + 1u]);
            }
        }
    }
}

void accumulate_tiled(uint g, uint wbase, bool in_image) {
    uint taps = p.kh * p.kw;
    uint tile = p.tile_in_h * p.tile_in_w;
    uint lid = gl_LocalInvocationIndex;
    int iy0 = int(gl_WorkGroupID.y * TILE_H) * p.stride_y - p.pad_top;
    int ix0 = int(gl_WorkGroupID.x * TILE_W) * p.stride_x - p.pad_left;
    uint lx = gl_LocalInvocationID.x * uint(p.stride_x);
    uint ly = gl_LocalInvocationID.y * uint(p.stride_y);
    for (uint c0 = 0u; c0 < p.ic_per_group; c0 += p.ic_chunk) {
        uint n = min(p.ic_chunk, p.ic_per_group - c0);
        // The previous chunk's reads of shared memory are done before it is overwritten.
        barrier();
        for (uint i = lid; i < n * tile; i += THREADS) {
            uint c = i / tile;
            uint r = i - c * tile;
            int iy = iy0 + int(r / p.tile_in_w);
            int ix = ix0 + int(r % p.tile_in_w);
            bool inside = iy >= 0 && iy < int(p.in_h) && ix >= 0 && ix < int(p.in_w);
            uint plane = (g * p.ic_per_group + c0 + c) * p.in_h * p.in_w;
            s_in[i] = inside ? float(x[plane + uint(iy) * p.in_w + uint(ix)]) : 0.0;
        }
        uint wfirst = wbase + c0 * taps * 2u;
        for (uint i = lid; i < n * taps * 2u; i += THREADS) {
            s_w[i] = vec4(w[wfirst + i]);
        }
        barrier();
        if (!in_image) {
            continue;
        }
        for (uint c = 0u; c < n; ++c) {
            for (uint ky = 0u; ky < p.kh; ++ky) {
                uint row = c * tile + (ly + ky * uint(p.dil_y)) * p.tile_in_w + lx;
                uint wi = (c * taps + ky * p.kw) * 2u;
                for (uint kx = 0u; kx < p.kw; ++kx) {
                    float v = s_in[row + kx * uint(p.dil_x)];
                    acc0 += v * s_w[wi + kx * 2u];
                    acc1 += v * s_w[wi + kx * 2u + 1u];
                }
            }
        }
    }
}

void main() {
    uint g = gl_WorkGroupID.z / p.oc_blocks;
    uint ob = gl_WorkGroupID.z % p.oc_blocks;
    uint ox = gl_GlobalInvocationID.x;
    uint oy = gl_GlobalInvocationID.y;
    bool in_image = ox < p.out_w && oy < p.out_h;
    uint wbase = (g * p.oc_blocks + ob) * p.ic_per_group * p.kh * p.kw * 2u;
    if (DIRECT) {
        if (!in_image) {
            return;
        }
        accumulate_direct(g, wbase, ox, oy);
    } else {
        // Every invocation takes part in the loads and barriers, also past the image edge.
        accumulate_tiled(g, wbase, in_image);
        if (!in_image) {
            return;
        }
    }
    float sums[8] = float[8](acc0.x, acc0.y, acc0.z, acc0.w, acc1.x, acc1.y, acc1.z, acc1.w);
    for (uint j = 0u; j < 8u; ++j) {
        uint oc_local = ob * 8u + j;
        if (oc_local >= p.oc_per_group) {
            break;
        }
        uint oc = g * p.oc_per_group + oc_local;
        float v = activate(ACT, sums[j] + float(bias[oc]), p.alpha, p.beta);
        y[(oc * p.out_h + oy) * p.out_w + ox] = sfp(v);
    }
}
