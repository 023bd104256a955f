#version 450
// The lazy sparse-row update (optimizer_sparse_common.glsl) with the formula of
// opt_ftrl.glsl, compiled twice: on vec4s (rows whose width is a multiple of 4)
// and on floats (other widths).
#extension GL_GOOGLE_include_directive : require
#include "optimizer_sparse_common.glsl"
#include "opt_sparse_vec4.glsl"
#include "opt_ftrl.glsl"
#include "opt_sparse_float.glsl"
#include "opt_ftrl.glsl"
