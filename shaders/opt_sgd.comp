#version 450
// SGD as torch.optim.SGD (see optimizers/sgd.h): h = (momentum, dampening,
// nesterov, weight_decay, first_step). Slot 0: the momentum buffer.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, float g, uvec3 slot) {
  float momentum = h[0], dampening = h[1], weight_decay = h[3];
  bool nesterov = h[2] != 0.0, first = h[4] != 0.0;
  float w = arena[p];
  g += weight_decay * w;
  if (momentum != 0.0) {
    // PyTorch starts the buffer at the first gradient, undamped.
    float buf = first ? g : momentum * arena[slot.x] + (1.0 - dampening) * g;
    arena[slot.x] = buf;
    g = nesterov ? g + momentum * buf : buf;
  }
  arena[p] = w - lr * g;
}
