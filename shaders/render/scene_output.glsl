// How the scene pass's fragment shaders write their colour. Specialization constant 0, set by
// ScenePass: true for the single-sample pass, whose attachment is the UNORM scene image: the
// shader encodes, like every image after the scene pass holds encoded values. False for the
// multisampled pass, whose attachment is sRGB: the hardware encodes each sample and the resolve
// averages them in linear light (as the dataset's supersampled reference is averaged).
layout(constant_id = 0) const bool ENCODE_IN_SHADER = true;

vec4 scene_output(vec3 linear) {
    return vec4(ENCODE_IN_SHADER ? srgb_encode(linear) : clamp(linear, 0.0, 1.0), 1.0);
}
