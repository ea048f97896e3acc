// ONNX Resize's coordinate_transformation_mode (numbers as in resize.rs): the input coordinate
// of output coordinate `o` along an axis. Shared by resize.comp and fused_conv.glsl's tail, so
// a fused bilinear base computes exactly what the Resize op computes.
float resize_source(uint mode, uint o, float scale, uint in_len, uint out_len) {
    float fo = float(o);
    switch (mode) {
    case 1u: // pytorch_half_pixel
        return out_len > 1u ? (fo + 0.5) / scale - 0.5 : 0.0;
    case 2u: // align_corners
        return out_len > 1u ? fo * float(in_len - 1u) / float(out_len - 1u) : 0.0;
    case 3u: // asymmetric
        return fo / scale;
    case 4u: // tf_half_pixel_for_nearest
        return (fo + 0.5) / scale;
    default: // half_pixel
        return (fo + 0.5) / scale - 0.5;
    }
}
