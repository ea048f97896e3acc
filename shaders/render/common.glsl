// Shared colour helpers. Every image between the scene pass and the swapchain holds
// display-encoded (sRGB) values in UNORM formats, as an ML upscaler expects its input.

vec3 srgb_encode(vec3 linear) {
    vec3 c = clamp(linear, 0.0, 1.0);
    return mix(c * 12.92, 1.055 * pow(c, vec3(1.0 / 2.4)) - 0.055, step(0.0031308, c));
}

vec3 srgb_decode(vec3 encoded) {
    return mix(encoded / 12.92, pow((encoded + 0.055) / 1.055, vec3(2.4)), step(0.04045, encoded));
}

vec3 sky_color(vec3 dir, vec3 sun) {
    float h = clamp(dir.y, -1.0, 1.0);
    vec3 horizon = vec3(0.62, 0.72, 0.85);
    vec3 zenith = vec3(0.10, 0.28, 0.62);
    vec3 ground = vec3(0.22, 0.20, 0.18);
    vec3 c = h > 0.0 ? mix(horizon, zenith, pow(h, 0.6)) : mix(horizon, ground, pow(-h, 0.4));
    float s = max(dot(dir, sun), 0.0);
    c += vec3(1.0, 0.85, 0.6) * (pow(s, 800.0) * 6.0 + pow(s, 12.0) * 0.25);
    return c;
}
