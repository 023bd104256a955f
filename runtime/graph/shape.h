#pragma once
// Tensor shapes (rank 0 to 6) and element types.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace vkt {

/// Element type of a tensor: f32 for values, i32 for labels and indices,
/// f16 (IEEE binary16) and bf16 (bfloat16) for values stored in half the
/// bytes (mixed precision; see cast() and half.h).
enum class DType { F32, I32, F16, BF16 };

const char* to_string(DType dtype);
/// Bytes one element takes: 4, or 2 for the half types.
std::size_t dtype_bytes(DType dtype);
/// f16 or bf16.
inline bool is_half(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16;
}

/// Dimensions of a tensor, outermost first; rank 0 is a scalar. Every
/// dimension is at least 1 and the elements number at most kMaxElements, so
/// element and byte counts never overflow.
///
///   vkt::Shape s{32, 10};   // rank 2, 320 elements
class Shape {
 public:
  static constexpr int kMaxRank = 6;
  /// 2^48 elements: more than any device holds, and 8 bytes each still fit an int64.
  static constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;

  Shape() = default;
  /// Throws vkt::Error for rank > 6, a dimension < 1 or more than kMaxElements elements.
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::vector<std::int64_t> dims);

  int rank() const { return static_cast<int>(dims_.size()); }
  std::int64_t operator[](int axis) const { return dims_[axis]; }
  const std::vector<std::int64_t>& dims() const { return dims_; }
  std::int64_t elements() const;
  /// "[32, 10]"; a scalar is "[]".
  std::string str() const;
  /// Resolves a negative axis (-1 is the last) and checks it; `what` names the op.
  int axis(int axis, const char* what) const;

  bool operator==(const Shape& other) const = default;

 private:
  std::vector<std::int64_t> dims_;
};

/// The NumPy broadcast of two shapes (dimensions aligned from the right, each
/// pair equal or one of them 1). Throws vkt::Error naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& op);

}  // namespace vkt
