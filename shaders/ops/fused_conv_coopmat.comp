#version 450
// variants: IMAGE_IN IMAGE_OUT CHAIN
// compiler: glslang
// Fused convolution on the matrix units (VK_KHR_cooperative_matrix), fp16 storage, fp32
// accumulation: the conv as an implicit GEMM. Rows (M) are CM_M consecutive output pixels of
// one row (a segment), columns (N) the output channels, depth (K) the input channels of one
// kernel tap: for tap (ky, kx) the A matrix is the staged tile's channel vectors of pixels
// x + kx .. x + kx + CM_M - 1 on row y + ky, one strided load from shared memory (channels
// innermost, each pixel's 16 padded to 24 so that the load's rows fall in different banks).
// The shape (CM_M, CM_N, CM_K) is chosen at load time from what the device offers. A work
// group of four subgroups computes a TILE_W × TILE_H tile for one block of 16 output
// channels; each subgroup owns SEGS segments and their accumulators for the whole reduction:
// a column of the tile, one segment per row, so that one A load serves every kernel row whose
// window holds that staged row. Where the output is in channel blocks and a segment lies
// inside the image, the accumulators get the bias, activation and residual as matrices and
// are stored straight into the output tensor (one strided store); elsewhere the sums go
// through a small per-subgroup scratch in shared memory to the common epilogue
// (fused_conv.glsl). CHAIN: the input tile is not loaded but computed by the same work group,
// as the output of the conv before this one, on the matrix units (fused_chain_coopmat.glsl).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#define FP16
#define STAGE_VEC4
// Channels of padding per staged pixel (infer::ops::fused_conv::Tiling::pad).
layout(constant_id = 19) const uint S_PAD = 8u;
layout(constant_id = 14) const uint CM_M = 16u;
layout(constant_id = 15) const uint CM_N = 16u;
layout(constant_id = 16) const uint CM_K = 16u;
layout(constant_id = 17) const uint SUBGROUP = 32u;
layout(constant_id = 18) const uint SEGS = 8u;
// Subgroups per work group (infer::ops::fused_conv::Tiling::subgroups).
layout(constant_id = 21) const uint SUBGROUPS = 4u;
// The invocations that stage the input tile (the whole work group).
#define STAGE_THREADS (SUBGROUPS * SUBGROUP)
#ifdef CHAIN
// The staged tile's rows hold whole segments of the head's output (fused_chain_coopmat.glsl).
#define S_COLS ((TILE_COLS + CM_M - 1u) / CM_M * CM_M)
#endif
#include "ops/fused_conv.glsl"

layout(local_size_x_id = 20) in;

const uint N_TILES = OC_TILE / CM_N;
// Products per tap group: CHUNK / CM_K, or one when a product spans TAP_GROUP taps.
const uint K_TILES = TAP_GROUP > 1u ? 1u : CHUNK / CM_K;
const uint SEGS_PER_ROW = TILE_W / CM_M;
// Each subgroup owns one column of segments (one per tile row) where the tile's segments per
// row match the subgroups; else a run of SEGS segments in row order.
// (A function, not a global constant: see `direct` in main.)
bool columns() {
    return SEGS_PER_ROW == SUBGROUPS && SEGS == TILE_H;
}

// Segment s of subgroup sg: (segment column, tile row).
uvec2 seg_at(uint sg, uint s) {
    if (columns()) {
        return uvec2(sg, s);
    }
    uint seg = sg * SEGS + s;
    return uvec2(seg % SEGS_PER_ROW, seg / SEGS_PER_ROW);
}

// Invocations per pixel in the epilogue (a subgroup wider than a segment splits the channels).
const uint GROUPS = SUBGROUP > CM_M ? SUBGROUP / CM_M : 1u;
#ifdef CHAIN
#include "ops/fused_chain_coopmat.glsl"
#endif

// Weights as [oc block][tap][input channel, padded to icp][16 output channels]: for a tap
// and CM_K channels, B is a CM_K × 16 row-major block.
layout(set = 0, binding = 1) restrict readonly buffer W { float16_t w[]; };

// Per subgroup: one segment's CM_M × 16 sums, row-major. Matrices are loaded from and stored
// to shared memory here and in s_in: keep every shared array a multiple of 16 bytes, so that
// each starts 16-byte aligned (an 8-byte array declared ahead of this one is the likely cause
// of the wrong sums in docs/bench/h100/engine-2026-12-07-tail-epilogue/).
shared float s_out[SUBGROUPS * CM_M * OC_TILE];
// The block's biases repeated on CM_M rows: the accumulator the direct store starts from.
shared float s_bias[CM_M * OC_TILE];


void main() {
    uint sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID;
    uint ob = gl_WorkGroupID.z;
    coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> acc[SEGS][N_TILES];
    [[unroll]] for (uint s = 0u; s < SEGS; ++s) {
        [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
            acc[s][n] = coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>(0.0);
        }
    }
#ifndef IMAGE_OUT
    // The output in channel blocks, and a residual (if any) too: the direct store applies.
    // (A local, not a global constant: glslang emits a global's short-circuit initializer as
    // code, and in the image_out variant it put that code after main's return.)
    bool direct = OUT_BLOCKED && (!RESIDUAL || RES_BLOCKED);
    if (direct) {
        // Read after the first staging barrier below.
        for (uint i = gl_LocalInvocationIndex; i < CM_M * OC_TILE; i += SUBGROUPS * SUBGROUP) {
            uint oc = ob * OC_TILE + i % OC_TILE;
            s_bias[i] = oc < p.oc ? float(bias[oc]) : 0.0;
        }
    }
    // The residual's segments, loaded before the reduction so that their latency hides behind
    // it (read by the direct store only, under the same condition).
    coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> res[SEGS][N_TILES];
    if (direct && RESIDUAL) {
        [[unroll]] for (uint s = 0u; s < SEGS; ++s) {
            uvec2 pos = seg_at(sg, s);
            uint oy = gl_WorkGroupID.y * TILE_H + pos.y;
            uint ox0 = gl_WorkGroupID.x * TILE_W + pos.x * CM_M;
            if (oy < p.out_h && ox0 + CM_M <= p.out_w) {
                uint at = ((ob * p.out_h + oy) * p.out_w + ox0) * OC_TILE;
                [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
                    coopMatLoad(res[s][n], residual, at + n * CM_N, OC_TILE,
                                gl_CooperativeMatrixLayoutRowMajor);
                }
            }
        }
    }
#endif
    for (uint c0 = 0u; c0 < p.ic; c0 += CHUNK) {
        barrier();
#ifdef CHAIN
        // One pass: the planner gives a chain only where the head's output is one chunk.
        chain_stage(gl_LocalInvocationIndex, sg);
#else
        stage_chunk(c0, gl_LocalInvocationIndex);
#endif
        barrier();
        if (columns()) {
            // A subgroup owns a column of segments, one per tile row: the A matrix of staged
            // row sr and kernel column kx is loaded once and multiplied into every segment
            // whose window holds that row (segment sr - ky with kernel row ky), with the
            // kernel column's B matrices held in registers. (3x3 on 4-row tiles: 18 A loads
            // per subgroup instead of 36; 5x5: 40 instead of 100.)
            uint col0 = sg * CM_M;
            [[unroll]] for (uint kt = 0u; kt < K_TILES; ++kt) {
                for (uint kx = 0u; kx < KW_STAGE; kx += TAP_GROUP) {
                    coopmat<float16_t, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> bk[KH][N_TILES];
                    [[unroll]] for (uint ky = 0u; ky < KH; ++ky) {
                        uint wrow = (ob * KH * KW_STAGE + ky * KW_STAGE + kx) * p.icp + c0 + kt * CM_K;
                        [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
                            coopMatLoad(bk[ky][n], w, wrow * OC_TILE + n * CM_N, OC_TILE,
                                        gl_CooperativeMatrixLayoutRowMajor);
                        }
                    }
                    [[unroll]] for (uint sr = 0u; sr < TILE_ROWS; ++sr) {
                        coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> a;
                        coopMatLoad(a, s_in, ((sr * S_COLS + col0 + kx) * S_STRIDE + kt * CM_K) / 4u,
                                    S_STRIDE / 4u, gl_CooperativeMatrixLayoutRowMajor);
                        [[unroll]] for (uint ky = 0u; ky < KH; ++ky) {
                            if (sr >= ky && sr - ky < SEGS) {
                                [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
                                    acc[sr - ky][n] = coopMatMulAdd(a, bk[ky][n], acc[sr - ky][n]);
                                }
                            }
                        }
                    }
                }
            }
            continue;
        }
        // One matrix product per kernel tap and CM_K staged channels; with TAP_GROUP = 2 (a
        // thin input staged as 8 channels) one product's depth is two neighbouring taps: the
        // A rows are then 16 consecutive staged values spanning two pixels.
        for (uint ky = 0u; ky < KH; ++ky) {
            for (uint kx = 0u; kx < KW_STAGE; kx += TAP_GROUP) {
                [[unroll]] for (uint kt = 0u; kt < K_TILES; ++kt) {
                    coopmat<float16_t, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> b[N_TILES];
                    uint wrow = (ob * KH * KW_STAGE + ky * KW_STAGE + kx) * p.icp + c0 + kt * CM_K;
                    [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
                        coopMatLoad(b[n], w, wrow * OC_TILE + n * CM_N, OC_TILE,
                                    gl_CooperativeMatrixLayoutRowMajor);
                    }
                    [[unroll]] for (uint s = 0u; s < SEGS; ++s) {
                        uvec2 at = seg_at(sg, s);
                        uint row = at.y + ky;
                        uint col = at.x * CM_M + kx;
                        coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> a;
                        coopMatLoad(a, s_in, ((row * S_COLS + col) * S_STRIDE + kt * CM_K) / 4u,
                                    S_STRIDE / 4u, gl_CooperativeMatrixLayoutRowMajor);
                        [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
                            acc[s][n] = coopMatMulAdd(a, b[n], acc[s][n]);
                        }
                    }
                }
            }
        }
    }
    uint scratch = sg * CM_M * OC_TILE;
    [[unroll]] for (uint s = 0u; s < SEGS; ++s) {
#ifndef IMAGE_OUT
        if (direct) {
            uvec2 pos = seg_at(sg, s);
            uint oy = gl_WorkGroupID.y * TILE_H + pos.y;
            uint ox0 = gl_WorkGroupID.x * TILE_W + pos.x * CM_M;
            if (oy < p.out_h && ox0 + CM_M <= p.out_w) {
                // Row i of the segment is pixel ox0 + i: its 16 channels are one run of the
                // block, so the segment is a CM_M × 16 row-major matrix with stride 16.
                uint at = ((ob * p.out_h + oy) * p.out_w + ox0) * OC_TILE;
                [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
                    coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> b;
                    coopMatLoad(b, s_bias, n * CM_N, OC_TILE, gl_CooperativeMatrixLayoutRowMajor);
                    coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> v =
                        acc[s][n] + b;
                    for (int e = 0; e < v.length(); ++e) {
                        v[e] = activate(ACT, v[e], p.alpha, p.beta);
                    }
                    coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> h =
                        coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>(v);
                    if (RESIDUAL) {
                        h = h + res[s][n];
                    }
                    coopMatStore(h, y, at + n * CM_N, OC_TILE, gl_CooperativeMatrixLayoutRowMajor);
                }
                continue;
            }
        }
#endif
        [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
            coopMatStore(acc[s][n], s_out, scratch + n * CM_N, OC_TILE,
                         gl_CooperativeMatrixLayoutRowMajor);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        uvec2 pos = seg_at(sg, s);
        uint oy = gl_WorkGroupID.y * TILE_H + pos.y;
        uint ox0 = gl_WorkGroupID.x * TILE_W + pos.x * CM_M;
#ifdef IMAGE_OUT
        // The tail: one output pixel of the segment's BLOCK x BLOCK per invocation (the whole
        // subgroup busy), from the three channels DepthToSpace gives it.
        for (uint t = lane; t < CM_M * BLOCK * BLOCK; t += SUBGROUP) {
            uint i = t % CM_M;
            uint sub = t / CM_M;
            uint bi = sub / BLOCK;
            uint bj = sub % BLOCK;
            if (ox0 + i < p.out_w && oy < p.out_h) {
                vec3 sums;
                for (uint c = 0u; c < 3u; ++c) {
                    sums[c] = s_out[scratch + i * OC_TILE + tail_channel(c, bi, bj)];
                }
                store_tail_rgb(ox0 + i, oy, bi, bj, sums);
            }
        }
#else
        // The whole subgroup stores: GROUPS invocations per pixel, OC_TILE / GROUPS channels
        // each.
        for (uint t = lane; t < CM_M * GROUPS; t += SUBGROUP) {
            uint i = t % CM_M;
            uint j0 = (t / CM_M) * (OC_TILE / GROUPS);
            float sums[OC_TILE];
            [[unroll]] for (uint j = 0u; j < OC_TILE; ++j) {
                sums[j] = s_out[scratch + i * OC_TILE + j];
            }
            store_channels(ox0 + i, oy, ob, sums, j0, OC_TILE / GROUPS);
        }
#endif
        // The scratch is read before the next segment overwrites it.
        subgroupMemoryBarrierShared();
        subgroupBarrier();
    }
}
