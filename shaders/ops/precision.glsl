// The storage type of the engine's tensors and weights. `sfp` is float, or float16_t in the
// variant built with FP16 (a shader's `// variants: FP16` directive, see build.rs); arithmetic
// stays in float either way (fp16 storage, fp32 accumulation). Reads convert with float(...),
// writes with sfp(...): both are no-ops in the fp32 variant, which is therefore the same
// program as before the type macro existed.
#ifdef FP16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define sfp float16_t
#define sfpvec4 f16vec4
#else
#define sfp float
#define sfpvec4 vec4
#endif
