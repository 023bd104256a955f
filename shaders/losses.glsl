// Shared by loss_values.comp, loss_sum.comp, loss_grad.comp and
// loss_sum_grad.comp; the codes are LossKind in runtime/graph/ops/losses.cpp.
// Include after the buffers
// Z { uint z_bits[]; }, X { float x[]; } and W { float w[]; }: z_bits holds f32
// labels as bits, or i32 class labels for SPARSE_XENT.

const uint SQUARED = 0;
const uint ABSOLUTE = 1;
const uint HUBER = 2;
const uint SIGMOID_XENT = 3;
const uint SPARSE_XENT = 4;
const uint IDENTITY = 5;  // the values in x are already per-element losses

layout(push_constant) uniform Params {
  uint n;        // elements of the per-element loss shape S
  uint classes;  // SPARSE_XENT: row length of the logits
  uint dy_step;  // loss_grad: 1 when dy has shape S, 0 when it is a scalar
  float scale;
  float delta;   // HUBER
  uint pad0, pad1, pad2;
  uvec4 dims;       // S, padded with 1 on the left
  uvec4 w_strides;  // element strides of the weights along dims, 0 = broadcast
};

float quiet_nan() { return uintBitsToFloat(0x7fc00000u); }

// The weight of element i of S (weights broadcast to S).
float weight_of(uint i) {
  uint rest = i;
  uint index = 0;
  for (int d = 3; d >= 0; --d) {
    index += (rest % dims[d]) * w_strides[d];
    rest /= dims[d];
  }
  return w[index];
}

// Pointwise loss of label z and prediction (or logit) v.
float pointwise_loss(uint op, float z, float v) {
  float e = v - z;
  switch (op) {
    case SQUARED: return e * e;
    case ABSOLUTE: return abs(e);
    case HUBER: {
      float q = min(abs(e), delta);
      return 0.5 * q * q + delta * (abs(e) - q);  // tf.losses.huber_loss's form
    }
    case SIGMOID_XENT: return max(v, 0.0) - v * z + log(1.0 + exp(-abs(v)));
    default: return v;  // IDENTITY
  }
}

// d pointwise_loss / d v (wrt_labels false) or / d z (true).
float pointwise_grad(uint op, bool wrt_labels, float z, float v) {
  float e = v - z;
  float d;
  switch (op) {
    case SQUARED: d = 2.0 * e; break;
    case ABSOLUTE: d = sign(e); break;
    case HUBER: d = abs(e) <= delta ? e : delta * sign(e); break;
    case SIGMOID_XENT: {
      if (wrt_labels) return -v;
      float t = exp(-abs(v));  // sigmoid without overflow
      return (v >= 0.0 ? 1.0 / (1.0 + t) : t / (1.0 + t)) - z;
    }
    default: return 1.0;  // IDENTITY
  }
  return wrt_labels ? -d : d;
}

// Row r of the logits: its maximum and log(sum(exp(x - max))).
vec2 row_logsumexp(uint r) {
  uint base = r * classes;
  float m = -1.0 / 0.0;
  for (uint k = 0; k < classes; ++k) m = max(m, x[base + k]);
  float s = 0.0;
  for (uint k = 0; k < classes; ++k) s += exp(x[base + k] - m);
  return vec2(m, log(s));
}

// A label outside [0, classes) reads nothing and gives NaN.
bool label_ok(int label) { return label >= 0 && uint(label) < classes; }

// Element i of the per-element losses, unweighted.
float loss_at(uint op, uint i) {
  if (op == SPARSE_XENT) {
    int label = int(z_bits[i]);
    if (!label_ok(label)) return quiet_nan();
    vec2 ml = row_logsumexp(i);
    return ml.y - (x[i * classes + uint(label)] - ml.x);
  }
  if (op == IDENTITY) return x[i];
  return pointwise_loss(op, uintBitsToFloat(z_bits[i]), x[i]);
}

#ifdef LOSS_WRITES_DX
// Writes the gradient of element i (a row of logits for SPARSE_XENT) scaled
// by g into dx (a buffer DX { float dx[]; } the includer declares), wrt the
// prediction or, with wrt_labels, an f32 label; returns the element's
// unweighted loss (the row's logsumexp serves both).
float write_loss_grad(uint op, uint i, float g, bool wrt_labels) {
  if (op == SPARSE_XENT) {
    uint base = i * classes;
    int label = int(z_bits[i]);
    if (!label_ok(label)) {
      for (uint k = 0; k < classes; ++k) dx[base + k] = quiet_nan();
      return quiet_nan();
    }
    vec2 ml = row_logsumexp(i);
    for (uint k = 0; k < classes; ++k) {
      float p = exp(x[base + k] - ml.x - ml.y);
      dx[base + k] = g * (k == uint(label) ? p - 1.0 : p);
    }
    return ml.y - (x[base + uint(label)] - ml.x);
  }
  float z = op == IDENTITY ? 0.0 : uintBitsToFloat(z_bits[i]);
  dx[i] = g * pointwise_grad(op, wrt_labels, z, x[i]);
  return loss_at(op, i);
}
#endif
