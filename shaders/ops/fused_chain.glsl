// The head of a conv → conv chain (fused_conv.comp's CHAIN variant, the packed path): the
// first conv of the pair runs inside the second one's dispatch. Each work group stages the
// head's input over the region its tile needs (the tile, the second conv's halo and the
// head's own), computes the head's activated output at every pixel the second conv stages
// (the halo is computed by both neighbouring work groups: recomputed rather than stored),
// and leaves it in the shared tile the second conv reads, so the intermediate tensor is never
// written to memory. The head's output is what the unfused head stores: its sums in the order
// of conv.comp, its bias and activation, rounded to the storage type; zero outside the image
// (the second conv's padding). Needs the head's output channels to fit one chunk (the
// planner checks it: infer/plan/fusion.rs).

layout(constant_id = 24) const uint A_KH = 3u;
layout(constant_id = 25) const uint A_KW = 3u;
layout(constant_id = 26) const uint A_ACT = 0u;
// The head's input channels as staged (its weights' channel stride).
layout(constant_id = 27) const uint A_CHUNK = 4u;

// The head's weights as [tap][input channel, padded to A_CHUNK][16 output channels] (one
// output-channel block), four vec4s per channel and tap, and its bias.
layout(set = 0, binding = 6) restrict readonly buffer WA { sfpvec4 wa[]; };
layout(set = 0, binding = 7) restrict readonly buffer BA { sfp bias_a[]; };

const uint A_ROWS = TILE_ROWS + A_KH - 1u;
const uint A_COLS = TILE_COLS + A_KW - 1u;
shared sfp s_a[A_ROWS * A_COLS * A_CHUNK];

// Fills s_in (TILE_ROWS × TILE_COLS × CHUNK) with the head's output. Every invocation of the
// work group takes part.
void chain_stage(uint lid) {
    // The second conv's staged tile, in the head's output coordinates, and the head's input
    // region in its input's.
    int by0 = int(gl_WorkGroupID.y * TILE_H) - p.pad_top;
    int bx0 = int(gl_WorkGroupID.x * TILE_W) - p.pad_left;
    int ay0 = by0 - p.a_pad_top;
    int ax0 = bx0 - p.a_pad_left;
    for (uint r = lid; r < A_ROWS * A_COLS; r += STAGE_THREADS) {
        int iy = ay0 + int(r / A_COLS);
        int ix = ax0 + int(r % A_COLS);
        bool inside = iy >= 0 && iy < int(p.a_in_h) && ix >= 0 && ix < int(p.a_in_w);
#ifdef IMAGE_IN
        // The frame's texel as the pre-process would have stored it.
        vec4 texel = inside ? texelFetch(frame_in, ivec2(ix, iy), 0) : vec4(0.0);
        [[unroll]] for (uint c = 0u; c < A_CHUNK; ++c) {
            s_a[r * A_CHUNK + c] = sfp(c < 3u ? texel[min(c, 3u)] : 0.0);
        }
#else
        uint plane = p.a_in_h * p.a_in_w;
        uint at = inside ? uint(iy) * p.a_in_w + uint(ix) : 0u;
        [[unroll]] for (uint c = 0u; c < A_CHUNK; ++c) {
            sfp v = sfp(0.0);
            if (inside && c < p.a_ic) {
                v = x[tensor_index(IN_BLOCKED, c, at, plane)];
            }
            s_a[r * A_CHUNK + c] = v;
        }
#endif
    }
    barrier();
    for (uint m = lid; m < TILE_ROWS * TILE_COLS; m += STAGE_THREADS) {
        uint my = m / TILE_COLS;
        uint mx = m % TILE_COLS;
        int gy = by0 + int(my);
        int gx = bx0 + int(mx);
        bool inside = gy >= 0 && gy < int(p.in_h) && gx >= 0 && gx < int(p.in_w);
        vec4 acc[4];
        [[unroll]] for (uint q = 0u; q < 4u; ++q) {
            acc[q] = vec4(0.0);
        }
        if (inside) {
            // As fused_conv.comp sums: channels, then kernel rows, then columns.
            for (uint c = 0u; c < p.a_ic; ++c) {
                for (uint ky = 0u; ky < A_KH; ++ky) {
                    for (uint kx = 0u; kx < A_KW; ++kx) {
                        uint wi = ((ky * A_KW + kx) * A_CHUNK + c) * 4u;
                        vec4 w0 = vec4(wa[wi]);
                        vec4 w1 = vec4(wa[wi + 1u]);
                        vec4 w2 = vec4(wa[wi + 2u]);
                        vec4 w3 = vec4(wa[wi + 3u]);
                        float v = float(s_a[((my + ky) * A_COLS + mx + kx) * A_CHUNK + c]);
                        acc[0] += v * w0;
                        acc[1] += v * w1;
                        acc[2] += v * w2;
                        acc[3] += v * w3;
                    }
                }
            }
        }
        [[unroll]] for (uint j = 0u; j < CHUNK; ++j) {
            sfp v = sfp(0.0);
            if (inside && j < p.a_oc) {
                float sum = acc[j / 4u][j % 4u];
                v = sfp(activate(A_ACT, sum + float(bias_a[j]), p.a_alpha, p.a_beta));
            }
            s_in[m * CHUNK + j] = v;
        }
    }
}
