#version 450
// out[4i + k] = component k of texel i of an RGBA32F texel buffer: checks the
// texel-buffer binding path (the fast loads on lavapipe) element by element.
layout(local_size_x_id = 0) in;

layout(binding = 0) uniform samplerBuffer src;
layout(std430, binding = 1) writeonly buffer Out { vec4 dst[]; };
layout(push_constant) uniform Params { uint texels; };

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < texels) dst[i] = texelFetch(src, int(i));
}
