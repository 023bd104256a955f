// The activations of layers::dense fused into matmul kernels (dense_fused.cpp).
// Codes are vkt::layers::Activation's: 0 none, 1 relu, 2 sigmoid, 3 tanh,
// 4 gelu (tanh form), 5 elu (alpha 1), 6 leaky relu (slope 0.2), 7 softplus.
// Include after activations.glsl.

vec4 dense_act4(uint code, vec4 v) {
  switch (code) {
    case 1u: return max(v, 0.0);
    case 2u: return sigmoid(v);
    case 3u: return stable_tanh(v);
    case 4u: return gelu_tanh(v);
    case 5u: return mix(exp(v) - 1.0, v, greaterThan(v, vec4(0.0)));
    case 6u: return select_ge0(v, v, 0.2 * v);
    case 7u: return softplus(v);
    default: return v;
  }
}
float dense_act(uint code, float v) { return dense_act4(code, vec4(v)).x; }

// act'(x) from y = act(x) alone, so the backward pass needs no pre-activation
// (gelu has no such form; dense keeps its pre-activation instead). Each sign
// test on y is the one unary_grad.comp makes on x: these activations keep the
// sign of x.
vec4 dense_act_grad4(uint code, vec4 y) {
  bvec4 positive = greaterThan(y, vec4(0.0));
  switch (code) {
    case 1u: return vec4(positive);
    case 2u: return y * (1.0 - y);
    case 3u: return 1.0 - y * y;
    case 5u: return mix(y + 1.0, vec4(1.0), positive);
    case 6u: return select_ge0(y, vec4(1.0), vec4(0.2));
    case 7u:
      // sigmoid(x) = 1 - exp(-y); its series where exp(-y) would round to 1.
      return mix(1.0 - exp(-y), y * (1.0 - y * (0.5 - y / 6.0)), lessThan(y, vec4(1e-3)));
    default: return vec4(1.0);
  }
}
float dense_act_grad(uint code, float y) { return dense_act_grad4(code, vec4(y)).x; }

// dy * act'(y), four at a time.
vec4 dense_dpre4(uint code, vec4 dy, vec4 y) { return dy * dense_act_grad4(code, y); }
