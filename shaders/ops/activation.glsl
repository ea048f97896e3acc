// Element-wise activations shared by unary.comp and conv.comp's fused epilogue. `kind` is a
// specialization constant in both, so the switch folds away when the pipeline is created.
// Numbers match `infer::ops::unary::Activation`.
const uint ACT_NONE = 0u;
const uint ACT_RELU = 1u;
const uint ACT_LEAKY_RELU = 2u;
const uint ACT_CLIP = 3u;
const uint ACT_SIGMOID = 4u;
const uint ACT_TANH = 5u;

float activate(uint kind, float x, float alpha, float beta) {
    switch (kind) {
    case ACT_RELU:
        return max(x, 0.0);
    case ACT_LEAKY_RELU:
        return x < 0.0 ? alpha * x : x;
    case ACT_CLIP:
        return min(max(x, alpha), beta);
    case ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case ACT_TANH: {
        // exp of a non-positive argument never overflows (built-in tanh may for large |x|).
        float e = exp(-2.0 * abs(x));
        float t = (1.0 - e) / (1.0 + e);
        return x < 0.0 ? -t : t;
    }
    default:
        return x;
    }
}
