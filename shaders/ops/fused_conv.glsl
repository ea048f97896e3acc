// What fused_conv.comp (packed: several pixels × 16 channels per invocation) and
// fused_conv_coopmat.comp (matrix units) share: the bindings, the input tile staged in shared
// memory and the epilogue. See infer/ops/fused_conv.rs for the planner's side.
//
// The op: a stride-1, dilation-1, ungrouped Conv of a tensor, computing one tile of
// TILE_W × TILE_H output pixels for one block of up to 16 output channels (work group z), with
// its bias and activation, and optionally
// - RESIDUAL: + a tensor of the output's shape (the long skip connection's Add),
// - IMAGE_IN (variant): its input read from the frame image (the pre-process fused away),
// - IMAGE_OUT (variant): DepthToSpace(BLOCK) of its output, + the bilinear Resize of the frame
//   (BASE), clamped and quantised into the output image (the tail and post-process fused away).
// Every fused step rounds to the storage type where the unfused ops would store a tensor, so
// the fused network computes exactly what the op-by-op one computes.
#include "ops/precision.glsl"
#include "ops/activation.glsl"
#include "ops/resize_coord.glsl"

layout(constant_id = 0) const uint ACT = 0u;
layout(constant_id = 1) const uint KH = 3u;
layout(constant_id = 2) const uint KW = 3u;
// Input channels staged per pass (the shared-memory tile holds CHUNK channels per pixel).
layout(constant_id = 3) const uint CHUNK = 16u;
layout(constant_id = 4) const uint TILE_W = 64u;
layout(constant_id = 5) const uint TILE_H = 8u;
layout(constant_id = 6) const bool RESIDUAL = false;
layout(constant_id = 7) const uint BLOCK = 2u;
layout(constant_id = 8) const bool CRD = false;
layout(constant_id = 9) const bool BASE = false;
layout(constant_id = 10) const uint COORD = 0u;
// The layouts of the input, residual and output tensors (infer::plan::Layout): NCHW, or
// channel blocks of 16 with the channels innermost ([C/16][H][W][16], "NCHW16c"), which the
// planner chooses for tensors that only fused convs write and read: a pixel's 16 channels are
// one 32-byte (fp16) or 64-byte (fp32) run, loaded and stored as vectors, and a run of pixels'
// channels is one strided matrix for the matrix units.
layout(constant_id = 11) const bool IN_BLOCKED = false;
layout(constant_id = 12) const bool RES_BLOCKED = false;
layout(constant_id = 13) const bool OUT_BLOCKED = false;
// The residual binding holds a tensor to add to the input as it is staged (the Add that
// produced the input, fused into its reader; never with RESIDUAL, whose binding it uses, and
// its layout is RES_BLOCKED). (14..22 are the matrix kernel's.)
layout(constant_id = 23) const bool IN_ADD = false;

const uint OC_TILE = 16u;
const uint TILE_ROWS = TILE_H + KH - 1u;
// Kernel columns per matrix product in the matrix kernel (1, or 2 when a product's depth holds
// two taps' worth of a thin input's channels); the staged tile and the weights round the
// kernel's width up to a multiple of it (the extra taps' weights are zero).
layout(constant_id = 22) const uint TAP_GROUP = 1u;
const uint KW_STAGE = (KW + TAP_GROUP - 1u) / TAP_GROUP * TAP_GROUP;
const uint TILE_COLS = TILE_W + KW_STAGE - 1u;
const uint TAPS = KH * KW;
const uint CBLOCK = 16u;

// Where element (channel c, pixel) of a tensor with `plane` pixels per channel is.
uint tensor_index(bool blocked, uint c, uint pixel, uint plane) {
    return blocked ? ((c / CBLOCK) * plane + pixel) * CBLOCK + c % CBLOCK : c * plane + pixel;
}

#ifdef IMAGE_IN
layout(set = 0, binding = 0) uniform sampler2D frame_in;
#else
layout(set = 0, binding = 0) restrict readonly buffer X { sfp x[]; };
// The same tensor as vectors of four channels (blocked layout).
layout(set = 0, binding = 0) restrict readonly buffer XV { sfpvec4 xv[]; };
#ifdef FP16
layout(set = 0, binding = 0) restrict readonly buffer XQ { uvec4 xq[]; };
#endif
#endif
layout(set = 0, binding = 2) restrict readonly buffer B { sfp bias[]; };
layout(set = 0, binding = 3) restrict readonly buffer R { sfp residual[]; };
#ifdef FP16
layout(set = 0, binding = 3) restrict readonly buffer RQ { uvec4 rq[]; };
#endif
#ifdef IMAGE_OUT
layout(set = 0, binding = 4, rgba8) uniform writeonly image2D frame_out;
layout(set = 0, binding = 5) uniform sampler2D frame_base;
#else
layout(set = 0, binding = 4) restrict writeonly buffer Y { sfp y[]; };
layout(set = 0, binding = 4) restrict writeonly buffer YV { sfpvec4 yv[]; };
#endif

layout(push_constant) uniform Push {
    uint in_h, in_w;
    uint out_h, out_w;
    int pad_top, pad_left;
    uint ic, icp;   // input channels, and rounded up to whole chunks (the weights' layout)
    uint oc;
    float alpha, beta;
    float base_scale_h, base_scale_w;
#ifdef CHAIN
    // The chain's head conv (fused_chain.glsl): its input's size, padding and channels, its
    // output channels and its activation's parameters.
    uint a_in_h, a_in_w;
    int a_pad_top, a_pad_left;
    uint a_ic, a_oc;
    float a_alpha, a_beta;
#endif
} p;

// The input tile of one chunk: [row][column][channel], channels innermost, so a run of pixels'
// channel vectors is one strided matrix (the coopmat path loads it as such). With STAGE_VEC4
// (the matrix kernel, CHUNK = 16) it is held as vectors of four channels with S_PAD channels
// of padding per pixel: the stores are vectors, and with a 48-byte pixel stride the 16 rows of
// a matrix load fall in different shared-memory banks.
// S_COLS: the tile's row stride in pixels (a chain on the matrix units widens it to whole
// segments of the head's output, fused_chain_coopmat.glsl).
#ifndef S_COLS
#define S_COLS TILE_COLS
#endif
#ifdef STAGE_VEC4
const uint S_STRIDE = CHUNK + S_PAD;
shared sfpvec4 s_in[TILE_ROWS * S_COLS * S_STRIDE / 4u];
#else
shared sfp s_in[TILE_ROWS * S_COLS * CHUNK];
#endif

// Stages input channels c0..c0+CHUNK of the work group's tile (zero outside the image and past
// the last channel): one pixel's CHUNK channels per step, so the frame's texel is fetched once
// and a tensor's planes are read at consecutive pixels by consecutive invocations. An input
// value is what the unfused network stores: the tensor's, or the frame's texel as the
// pre-process would have stored it. Every invocation of the work group takes part.
#if defined(FP16) && !defined(IMAGE_IN)
// Pixels each invocation stages.
const uint STAGE_PER = (TILE_ROWS * TILE_COLS + STAGE_THREADS - 1u) / STAGE_THREADS;

// stage_chunk for a channel-blocked fp16 input staged 16 channels at a time: every
// invocation issues the 16-byte loads of all its pixels before it stores the first, so
// their latencies overlap (the general loop below waits for each pixel's loads in turn).
void stage_blocked16(uint c0, uint lid) {
    int iy0 = int(gl_WorkGroupID.y * TILE_H) - p.pad_top;
    int ix0 = int(gl_WorkGroupID.x * TILE_W) - p.pad_left;
    const uint plane = TILE_ROWS * TILE_COLS;
    uint plane_in = p.in_h * p.in_w;
    uvec4 raw[STAGE_PER][2];
    // IN_ADD: the added tensor's values at the same places (also in blocks: see stage_chunk).
    uvec4 add[STAGE_PER][2];
    [[unroll]] for (uint i = 0u; i < STAGE_PER; ++i) {
        uint r = lid + i * STAGE_THREADS;
        int iy = iy0 + int(r / TILE_COLS);
        int ix = ix0 + int(r % TILE_COLS);
        bool inside = r < plane && iy >= 0 && iy < int(p.in_h) && ix >= 0 && ix < int(p.in_w);
        uint at8 = inside ? tensor_index(true, c0, uint(iy) * p.in_w + uint(ix), plane_in) / 8u : 0u;
        raw[i][0] = inside ? xq[at8] : uvec4(0u);
        raw[i][1] = inside ? xq[at8 + 1u] : uvec4(0u);
        if (IN_ADD) {
            add[i][0] = inside ? rq[at8] : uvec4(0u);
            add[i][1] = inside ? rq[at8 + 1u] : uvec4(0u);
        }
    }
    [[unroll]] for (uint i = 0u; i < STAGE_PER; ++i) {
        uint r = lid + i * STAGE_THREADS;
        if (r < plane) {
            sfp v[CHUNK];
            [[unroll]] for (uint e = 0u; e < 16u; ++e) {
                f16vec2 h = unpackFloat2x16(raw[i][e / 8u][(e % 8u) / 2u]);
                sfp x = h[e % 2u];
                if (IN_ADD) {
                    // As the unfused Add computes it (binary.comp): in fp32, then stored.
                    f16vec2 a = unpackFloat2x16(add[i][e / 8u][(e % 8u) / 2u]);
                    x = sfp(float(x) + float(a[e % 2u]));
                }
                // A block's channels past the last hold no value (zero them).
                v[e] = c0 + e < p.ic ? x : sfp(0.0);
            }
#ifdef STAGE_VEC4
            [[unroll]] for (uint q = 0u; q < CHUNK / 4u; ++q) {
                s_in[r * (S_STRIDE / 4u) + q] =
                    sfpvec4(v[q * 4u], v[q * 4u + 1u], v[q * 4u + 2u], v[q * 4u + 3u]);
            }
#else
            [[unroll]] for (uint c = 0u; c < CHUNK; ++c) {
                s_in[r * CHUNK + c] = v[c];
            }
#endif
        }
    }
}
#endif

void stage_chunk(uint c0, uint lid) {
#if defined(FP16) && !defined(IMAGE_IN)
    if (IN_BLOCKED && CHUNK == 16u && (!IN_ADD || RES_BLOCKED)) {
        stage_blocked16(c0, lid);
        return;
    }
#endif
    const uint threads = STAGE_THREADS;
    int iy0 = int(gl_WorkGroupID.y * TILE_H) - p.pad_top;
    int ix0 = int(gl_WorkGroupID.x * TILE_W) - p.pad_left;
    const uint plane = TILE_ROWS * TILE_COLS;
    for (uint r = lid; r < plane; r += threads) {
        int iy = iy0 + int(r / TILE_COLS);
        int ix = ix0 + int(r % TILE_COLS);
        bool inside = iy >= 0 && iy < int(p.in_h) && ix >= 0 && ix < int(p.in_w);
#ifdef IMAGE_IN
        vec4 texel = vec4(0.0);
        if (inside) {
            texel = texelFetch(frame_in, ivec2(ix, iy), 0);
        }
        sfp v[CHUNK];
        [[unroll]] for (uint c = 0u; c < CHUNK; ++c) {
            v[c] = sfp(c0 + c < 3u ? texel[min(c0 + c, 3u)] : 0.0);
        }
#else
        uint at = inside ? uint(iy) * p.in_w + uint(ix) : 0u;
        uint plane_in = p.in_h * p.in_w;
        // All CHUNK loads are issued before the first store (no branch between them where the
        // pixel is inside and the chunk is whole: the common case).
        sfp v[CHUNK];
#ifdef FP16
        if (IN_BLOCKED && CHUNK % 8u == 0u) {
            // Eight halves per 16-byte load.
            uint at8 = tensor_index(true, c0, at, plane_in) / 8u;
            [[unroll]] for (uint q = 0u; q < CHUNK / 8u; ++q) {
                uvec4 u = inside ? xq[at8 + q] : uvec4(0u);
                [[unroll]] for (uint e = 0u; e < 8u; ++e) {
                    f16vec2 h = unpackFloat2x16(u[e / 2u]);
                    v[q * 8u + e] = c0 + q * 8u + e < p.ic ? h[e % 2u] : sfp(0.0);
                }
            }
        } else
#endif
        if (IN_BLOCKED && CHUNK % 4u == 0u) {
            // A chunk lies within one block (CHUNK divides 16): CHUNK / 4 vector loads.
            uint at4 = tensor_index(true, c0, at, plane_in) / 4u;
            [[unroll]] for (uint q = 0u; q < CHUNK / 4u; ++q) {
                sfpvec4 t = inside ? xv[at4 + q] : sfpvec4(0.0);
                [[unroll]] for (uint e = 0u; e < 4u; ++e) {
                    // A block's channels past the last hold no value (zero them).
                    v[q * 4u + e] = c0 + q * 4u + e < p.ic ? t[e] : sfp(0.0);
                }
            }
        } else if (inside && c0 + CHUNK <= p.ic) {
            [[unroll]] for (uint c = 0u; c < CHUNK; ++c) {
                v[c] = x[tensor_index(IN_BLOCKED, c0 + c, at, plane_in)];
            }
        } else {
            [[unroll]] for (uint c = 0u; c < CHUNK; ++c) {
                v[c] = sfp(0.0);
                if (inside && c0 + c < p.ic) {
                    v[c] = x[tensor_index(IN_BLOCKED, c0 + c, at, plane_in)];
                }
            }
        }
        if (IN_ADD) {
            // As the unfused Add computes it (binary.comp): in fp32, then stored; zero
            // outside the image and past the last channel, as the Add's output is there.
            [[unroll]] for (uint c = 0u; c < CHUNK; ++c) {
                if (inside && c0 + c < p.ic) {
                    float a = float(residual[tensor_index(RES_BLOCKED, c0 + c, at, plane_in)]);
                    v[c] = sfp(float(v[c]) + a);
                }
            }
        }
#endif
#ifdef STAGE_VEC4
        [[unroll]] for (uint q = 0u; q < CHUNK / 4u; ++q) {
            s_in[r * (S_STRIDE / 4u) + q] =
                sfpvec4(v[q * 4u], v[q * 4u + 1u], v[q * 4u + 2u], v[q * 4u + 3u]);
        }
#else
        [[unroll]] for (uint c = 0u; c < CHUNK; ++c) {
            s_in[r * CHUNK + c] = v[c];
        }
#endif
    }
}

// The value the unfused Conv (+ activation) would store for output channel `oc`.
float conv_out(uint oc, float sum) {
    return float(sfp(activate(ACT, sum + float(bias[oc]), p.alpha, p.beta)));
}

#ifdef IMAGE_OUT
// The frame's bilinear Resize at output pixel (x, y), as resize.comp computes it from the
// input tensor the pre-process would have written.
vec3 base_value(uint x, uint y) {
    uvec2 in_size = uvec2(textureSize(frame_base, 0));
    uvec2 out_size = uvec2(imageSize(frame_out));
    float sy = resize_source(COORD, y, p.base_scale_h, in_size.y, out_size.y);
    float sx = resize_source(COORD, x, p.base_scale_w, in_size.x, out_size.x);
    sy = clamp(sy, 0.0, float(in_size.y - 1u));
    sx = clamp(sx, 0.0, float(in_size.x - 1u));
    uint y0 = uint(sy);
    uint x0 = uint(sx);
    uint y1 = min(y0 + 1u, in_size.y - 1u);
    uint x1 = min(x0 + 1u, in_size.x - 1u);
    float ty = sy - float(y0);
    float tx = sx - float(x0);
    vec3 v00 = vec3(sfpvec4(texelFetch(frame_base, ivec2(x0, y0), 0)).rgb);
    vec3 v01 = vec3(sfpvec4(texelFetch(frame_base, ivec2(x1, y0), 0)).rgb);
    vec3 v10 = vec3(sfpvec4(texelFetch(frame_base, ivec2(x0, y1), 0)).rgb);
    vec3 v11 = vec3(sfpvec4(texelFetch(frame_base, ivec2(x1, y1), 0)).rgb);
    vec3 r;
    for (uint c = 0u; c < 3u; ++c) {
        float top = mix(v00[c], v01[c], tx);
        float bottom = mix(v10[c], v11[c], tx);
        r[c] = float(sfp(mix(top, bottom, ty)));
    }
    return r;
}

// The conv output channel of colour channel c at output pixel (bi, bj) of a low-resolution
// pixel's BLOCK × BLOCK (DepthToSpace: CRD or DCR order).
uint tail_channel(uint c, uint bi, uint bj) {
    return CRD ? (c * BLOCK * BLOCK + bi * BLOCK + bj) : ((bi * BLOCK + bj) * 3u + c);
}

// The tail for output pixel (bi, bj) of low-resolution pixel (ox, oy)'s BLOCK × BLOCK, from
// the sums of its three channels (tail_channel).
void store_tail_rgb(uint ox, uint oy, uint bi, uint bj, vec3 sums) {
    uint x = ox * BLOCK + bj;
    uint y = oy * BLOCK + bi;
    vec3 base = BASE ? base_value(x, y) : vec3(0.0);
    vec3 v;
    for (uint c = 0u; c < 3u; ++c) {
        float d = conv_out(tail_channel(c, bi, bj), sums[c]);
        v[c] = BASE ? float(sfp(d + base[c])) : d;
    }
    vec3 q = floor(clamp(v, 0.0, 1.0) * 255.0 + 0.5) / 255.0;
    imageStore(frame_out, ivec2(x, y), vec4(q, 1.0));
}

// The tail for output pixel (bi, bj) of low-resolution pixel (ox, oy)'s BLOCK × BLOCK.
void store_tail_at(uint ox, uint oy, uint bi, uint bj, float sums[OC_TILE]) {
    vec3 s;
    for (uint c = 0u; c < 3u; ++c) {
        s[c] = sums[tail_channel(c, bi, bj)];
    }
    store_tail_rgb(ox, oy, bi, bj, s);
}

// The tail for one low-resolution pixel: its BLOCK × BLOCK output pixels.
void store_tail(uint ox, uint oy, float sums[OC_TILE]) {
    for (uint bi = 0u; bi < BLOCK; ++bi) {
        for (uint bj = 0u; bj < BLOCK; ++bj) {
            store_tail_at(ox, oy, bi, bj, sums);
        }
    }
}
#endif

#ifndef IMAGE_OUT
// Writes channels j0 .. j0 + count of output pixel (ox, oy) of output-channel block `ob` from
// its sums (channel j of the block in sums[j]); the residual's values are all loaded before
// the first store, so the loads overlap.
void store_channels(uint ox, uint oy, uint ob, float sums[OC_TILE], uint j0, uint count) {
    if (ox >= p.out_w || oy >= p.out_h) {
        return;
    }
    uint end = min(j0 + count, min(OC_TILE, p.oc - ob * OC_TILE));
    uint plane = p.out_h * p.out_w;
    uint pixel = oy * p.out_w + ox;
    float res[OC_TILE];
    [[unroll]] for (uint j = 0u; j < OC_TILE; ++j) {
        res[j] = 0.0;
        if (RESIDUAL && j >= j0 && j < end) {
            res[j] = float(residual[tensor_index(RES_BLOCKED, ob * OC_TILE + j, pixel, plane)]);
        }
    }
    float v[OC_TILE];
    [[unroll]] for (uint j = 0u; j < OC_TILE; ++j) {
        v[j] = 0.0;
        if (j >= j0 && j < end) {
            float c = conv_out(ob * OC_TILE + j, sums[j]);
            v[j] = float(sfp(RESIDUAL ? c + res[j] : c));
        }
    }
    if (OUT_BLOCKED && j0 % 4u == 0u && end % 4u == 0u) {
        // Whole vectors of four channels (a block is one output-channel tile).
        uint at4 = tensor_index(true, ob * OC_TILE, pixel, plane) / 4u;
        [[unroll]] for (uint q = 0u; q < OC_TILE / 4u; ++q) {
            if (q * 4u >= j0 && q * 4u < end) {
                yv[at4 + q] = sfpvec4(v[q * 4u], v[q * 4u + 1u], v[q * 4u + 2u], v[q * 4u + 3u]);
            }
        }
    } else {
        [[unroll]] for (uint j = 0u; j < OC_TILE; ++j) {
            if (j >= j0 && j < end) {
                y[tensor_index(OUT_BLOCKED, ob * OC_TILE + j, pixel, plane)] = sfp(v[j]);
            }
        }
    }
}
#endif

// Writes output pixel (ox, oy) of output-channel block `ob` from its sums (channel j of the
// block in sums[j]).
void store_pixel(uint ox, uint oy, uint ob, float sums[OC_TILE]) {
#ifdef IMAGE_OUT
    if (ox < p.out_w && oy < p.out_h) {
        store_tail(ox, oy, sums);
    }
#else
    store_channels(ox, oy, ob, sums, 0u, OC_TILE);
#endif
}
