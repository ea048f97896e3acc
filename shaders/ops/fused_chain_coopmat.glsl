// The head of a conv → conv chain on the matrix units (fused_conv_coopmat.comp's CHAIN
// variant): the first conv of the pair runs inside the second one's dispatch, as on the packed
// path (fused_chain.glsl), but as matrix products. Each work group stages the head's input
// over the region its tile needs, computes the head's output at every pixel the second conv
// stages, a segment of CM_M pixels of one row at a time (the halo is computed by both
// neighbouring work groups: recomputed rather than stored), and stores the activated segment
// as fp16 straight into the shared tile the second conv loads its A matrices from (its rows
// widened to whole segments: S_COLS), so the intermediate tensor is never written to memory.
// The head's output is what the unfused head computes: the same products over the same taps,
// its bias and activation on the accumulators, rounded to fp16; zero outside the image (the
// second conv's padding). Needs the head's input and output channels to fit one chunk of 16
// (the planner checks it: infer/ops/fused_conv.rs, coopmat_chain_tiling).

layout(constant_id = 24) const uint A_KH = 3u;
layout(constant_id = 25) const uint A_KW = 3u;
layout(constant_id = 26) const uint A_ACT = 0u;
// The head's input channels as staged per pixel: 8 for a thin input (two taps per product,
// as the unfused thin conv runs), else 16 (its weights' channel stride).
layout(constant_id = 27) const uint A_CHUNK = 8u;
// Kernel columns per product of the head (2 with A_CHUNK = 8, else 1).
layout(constant_id = 28) const uint A_TAP_GROUP = 2u;

const uint A_KW_STAGE = (A_KW + A_TAP_GROUP - 1u) / A_TAP_GROUP * A_TAP_GROUP;
// The head's output: every row of the second conv's staged tile, in whole segments.
const uint H_SEGS = S_COLS / CM_M;
// The head's input region: its output region and the head's own halo.
const uint A_ROWS = TILE_ROWS + A_KH - 1u;
const uint A_COLS = S_COLS + A_KW_STAGE - 1u;
// Products per tap group of the head.
const uint A_K_TILES = A_TAP_GROUP > 1u ? 1u : A_CHUNK / CM_K;

// The head's weights as [tap over A_KH x A_KW_STAGE][input channel, padded to A_CHUNK][16
// output channels] (one output-channel block), and its bias.
layout(set = 0, binding = 6) restrict readonly buffer WA { float16_t wa[]; };
layout(set = 0, binding = 7) restrict readonly buffer BA { float16_t bias_a[]; };

shared f16vec4 s_a[A_ROWS * A_COLS * A_CHUNK / 4u];
// The head's biases repeated on CM_M rows: the accumulator's bias matrix.
shared float s_abias[CM_M * OC_TILE];

// Fills s_in (TILE_ROWS × S_COLS × S_STRIDE) with the head's output. Every invocation of the
// work group takes part; the caller's barrier follows.
void chain_stage(uint lid, uint sg) {
    // The second conv's staged tile, in the head's output coordinates, and the head's input
    // region in its input's.
    int by0 = int(gl_WorkGroupID.y * TILE_H) - p.pad_top;
    int bx0 = int(gl_WorkGroupID.x * TILE_W) - p.pad_left;
    int ay0 = by0 - p.a_pad_top;
    int ax0 = bx0 - p.a_pad_left;
    for (uint i = lid; i < CM_M * OC_TILE; i += STAGE_THREADS) {
        uint oc = i % OC_TILE;
        s_abias[i] = oc < p.a_oc ? float(bias_a[oc]) : 0.0;
    }
    for (uint r = lid; r < A_ROWS * A_COLS; r += STAGE_THREADS) {
        int iy = ay0 + int(r / A_COLS);
        int ix = ax0 + int(r % A_COLS);
        bool inside = iy >= 0 && iy < int(p.a_in_h) && ix >= 0 && ix < int(p.a_in_w);
        float16_t v[A_CHUNK];
#ifdef IMAGE_IN
        // The frame's texel as the pre-process would have stored it.
        vec4 texel = inside ? texelFetch(frame_in, ivec2(ix, iy), 0) : vec4(0.0);
        [[unroll]] for (uint c = 0u; c < A_CHUNK; ++c) {
            v[c] = float16_t(c < 3u ? texel[min(c, 3u)] : 0.0);
        }
#else
        uint plane = p.a_in_h * p.a_in_w;
        uint at = inside ? uint(iy) * p.a_in_w + uint(ix) : 0u;
        [[unroll]] for (uint c = 0u; c < A_CHUNK; ++c) {
            v[c] = inside && c < p.a_ic ? x[tensor_index(IN_BLOCKED, c, at, plane)] : float16_t(0.0);
        }
#endif
        [[unroll]] for (uint q = 0u; q < A_CHUNK / 4u; ++q) {
            s_a[r * (A_CHUNK / 4u) + q] = f16vec4(v[q * 4u], v[q * 4u + 1u], v[q * 4u + 2u], v[q * 4u + 3u]);
        }
    }
    barrier();
    // The head's output segments, shared out over the subgroups; a product's A rows are CM_M
    // consecutive staged pixels (with A_TAP_GROUP = 2: 8 channels of two neighbouring taps).
    for (uint hs = sg; hs < TILE_ROWS * H_SEGS; hs += SUBGROUPS) {
        uint hr = hs / H_SEGS;
        uint hc = (hs % H_SEGS) * CM_M;
        coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> acc[N_TILES];
        [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
            acc[n] = coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>(0.0);
        }
        for (uint ky = 0u; ky < A_KH; ++ky) {
            for (uint kx = 0u; kx < A_KW_STAGE; kx += A_TAP_GROUP) {
                [[unroll]] for (uint kt = 0u; kt < A_K_TILES; ++kt) {
                    coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> a;
                    coopMatLoad(a, s_a, (((hr + ky) * A_COLS + hc + kx) * A_CHUNK + kt * CM_K) / 4u,
                                A_CHUNK / 4u, gl_CooperativeMatrixLayoutRowMajor);
                    uint wrow = (ky * A_KW_STAGE + kx) * A_CHUNK + kt * CM_K;
                    [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
                        coopmat<float16_t, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> b;
                        coopMatLoad(b, wa, wrow * OC_TILE + n * CM_N, OC_TILE,
                                    gl_CooperativeMatrixLayoutRowMajor);
                        acc[n] = coopMatMulAdd(a, b, acc[n]);
                    }
                }
            }
        }
        [[unroll]] for (uint n = 0u; n < N_TILES; ++n) {
            coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> b;
            coopMatLoad(b, s_abias, n * CM_N, OC_TILE, gl_CooperativeMatrixLayoutRowMajor);
            coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> v = acc[n] + b;
            for (int e = 0; e < v.length(); ++e) {
                v[e] = activate(A_ACT, v[e], p.a_alpha, p.a_beta);
            }
            coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> h =
                coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>(v);
            coopMatStore(h, s_in, ((hr * S_COLS + hc) * S_STRIDE + n * CM_N) / 4u, S_STRIDE / 4u,
                         gl_CooperativeMatrixLayoutRowMajor);
        }
    }
    // The second conv's padding: zero where the staged pixel is outside the head's output
    // (work groups at the image's edges only).
    if (by0 < 0 || bx0 < 0 || by0 + int(TILE_ROWS) > int(p.in_h) || bx0 + int(S_COLS) > int(p.in_w)) {
        barrier();
        for (uint r = lid; r < TILE_ROWS * S_COLS; r += STAGE_THREADS) {
            int gy = by0 + int(r / S_COLS);
            int gx = bx0 + int(r % S_COLS);
            if (gy < 0 || gy >= int(p.in_h) || gx < 0 || gx >= int(p.in_w)) {
                [[unroll]] for (uint q = 0u; q < S_STRIDE / 4u; ++q) {
                    s_in[r * (S_STRIDE / 4u) + q] = f16vec4(0.0);
                }
            }
        }
    }
}
