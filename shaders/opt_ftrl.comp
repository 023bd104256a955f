#version 450
// The dense update of every variable of one call (optimizer_common.glsl), with
// the formula of opt_ftrl.glsl on vec4s.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"
#include "opt_ftrl.glsl"
