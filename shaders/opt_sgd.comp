#version 450
// SGD as torch.optim.SGD (see optimizers/sgd.h): H = (momentum, dampening,
// nesterov, weight_decay, first_step). Slot 0: the momentum buffer.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, vec4 g, uvec3 slot) {
  float momentum = H[0], dampening = H[1], weight_decay = H[3];
  bool nesterov = H[2] != 0.0, first = H[4] != 0.0;
  vec4 w = arena[p];
  g += weight_decay * w;
  if (momentum != 0.0) {
    // PyTorch starts the buffer at the first gradient, undamped.
    vec4 buf = first ? g : momentum * arena[slot.x] + (1.0 - dampening) * g;
    arena[slot.x] = buf;
    g = nesterov ? g + momentum * buf : buf;
  }
  arena[p] = w - LR * g;
}
