#version 450
// variants: FP16 IMAGE_IN IMAGE_OUT CHAIN
// Fused convolution, packed path: a 16 × TILE_H work group (8 rows, or fewer for a chain)
// computes a 64 × TILE_H tile of output pixels for one block of 16 output channels; each
// invocation keeps 4 pixels (16 apart, so the stores of each pixel index are coalesced) × 16
// channels of sums in registers. Input chunks are staged in shared memory (fused_conv.glsl);
// one tap's 16 weights are four vec4 loads, used for four pixels. Per output, the sums run
// over channels, then kernel rows, then columns: the order of conv.comp, so fp32 results are
// the same bits. CHAIN: the input tile is not loaded but computed by the same work group, as
// the output of the conv before this one (fused_chain.glsl).
#extension GL_EXT_control_flow_attributes : require
// The invocations that stage the input tile (the work group).
#define STAGE_THREADS (16u * TILE_H)
#include "ops/fused_conv.glsl"
#ifdef CHAIN
#include "ops/fused_chain.glsl"
#endif

layout(local_size_x = 16, local_size_y_id = 5) in;

const uint PIXELS = 4u;

// Weights as [oc block][tap][input channel, padded to icp][16 output channels].
layout(set = 0, binding = 1) restrict readonly buffer W { sfpvec4 w[]; };

void main() {
    uint lx = gl_LocalInvocationID.x;
    uint ly = gl_LocalInvocationID.y;
    uint ob = gl_WorkGroupID.z;
    vec4 acc[PIXELS][4];
    [[unroll]] for (uint px = 0u; px < PIXELS; ++px) {
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            acc[px][j] = vec4(0.0);
        }
    }
    for (uint c0 = 0u; c0 < p.ic; c0 += CHUNK) {
        // The previous chunk's reads are done before the tile is overwritten.
        barrier();
#ifdef CHAIN
        // One pass: the planner gives a chain only where the head's output is one chunk.
        chain_stage(gl_LocalInvocationIndex);
#else
        stage_chunk(c0, gl_LocalInvocationIndex);
#endif
        barrier();
        uint n = min(CHUNK, p.ic - c0);
        for (uint c = 0u; c < n; ++c) {
            for (uint ky = 0u; ky < KH; ++ky) {
                for (uint kx = 0u; kx < KW; ++kx) {
                    uint wi = ((ob * TAPS + ky * KW + kx) * p.icp + c0 + c) * 4u;
                    vec4 w0 = vec4(w[wi]);
                    vec4 w1 = vec4(w[wi + 1u]);
                    vec4 w2 = vec4(w[wi + 2u]);
                    vec4 w3 = vec4(w[wi + 3u]);
                    uint row = (ly + ky) * TILE_COLS + lx + kx;
                    [[unroll]] for (uint px = 0u; px < PIXELS; ++px) {
                        float v = float(s_in[(row + px * 16u) * CHUNK + c]);
                        acc[px][0] += v * w0;
                        acc[px][1] += v * w1;
                        acc[px][2] += v * w2;
                        acc[px][3] += v * w3;
                    }
                }
            }
        }
    }
    uint oy = gl_WorkGroupID.y * TILE_H + ly;
    [[unroll]] for (uint px = 0u; px < PIXELS; ++px) {
        float sums[OC_TILE];
        [[unroll]] for (uint j = 0u; j < OC_TILE; ++j) {
            sums[j] = acc[px][j / 4u][j % 4u];
        }
        store_pixel(gl_WorkGroupID.x * TILE_W + px * 16u + lx, oy, ob, sums);
    }
}
