// f'(x) for the unary op `op` (UnaryKind codes), from x (v) or the forward
// output (out_v) where that is cheaper; shared by unary_grad.comp and
// unary_grad_vec4.comp. Include after activations.glsl.
float unary_derivative(uint op, float v, float out_v, float alpha) {
  float d;
  switch (op) {
    case 0:
      d = -1.0;
      break;
    case 1:
      d = sign(v);
      break;
    case 2:
      d = out_v;
      break;
    case 3:
      d = 1.0 / v;
      break;
    case 4:
      d = 0.5 / out_v;
      break;
    case 5:
      d = 2.0 * v;
      break;
    case 6:
      d = alpha * power(v, alpha - 1.0);
      break;
    case 7:
      d = v > 0.0 ? 1.0 : 0.0;
      break;
    case 8:
      d = v >= 0.0 ? 1.0 : alpha;
      break;
    case 9:
      d = v > 0.0 ? 1.0 : out_v + alpha;
      break;
    case 10: {
      float inner = SQRT_2_OVER_PI * (v + GELU_C * v * v * v);
      float t = stable_tanh(inner);
      d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * v * v);
      break;
    }
    case 11:
      d = out_v * (1.0 - out_v);
      break;
    case 12:
      d = 1.0 - out_v * out_v;
      break;
    case 13:
      d = sigmoid(v);
      break;
    case 14:
      d = 0.0;
      break;
    // Phi(x) + x phi(x).
    case 16:
      d = 0.5 * (1.0 + erf_as(v * INV_SQRT_2)) + v * INV_SQRT_2PI * exp(-0.5 * v * v);
      break;
    // silu: s + x s (1 - s) with s = sigmoid(x).
    case 19: {
      float s = sigmoid(v);
      d = s * (1.0 + v * (1.0 - s));
      break;
    }
    default:
      d = 1.0;
      break;  // 15: identity
  }
  return d;
}
