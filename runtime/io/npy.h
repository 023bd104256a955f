#pragma once
// NumPy .npy files: the format numpy.save writes (version 1 to 3, C order).

#include <cstdint>
#include <string>
#include <vector>

namespace vkt {

/// An array read from a .npy file. Float arrays (f2, f4, f8) come back as f32
/// values (f2 widened exactly, f8 rounded); integer arrays (i1 to i8, u1 to
/// u8) and bool ones (b1, as 0 and 1) as i32, a value out of the i32 range
/// being an error.
struct NpyArray {
  std::vector<std::int64_t> shape;
  bool integer = false;  ///< i32 values (from an integer or bool array), else f32
  std::vector<float> f32;
  std::vector<std::int32_t> i32;
};

/// Reads `path`. A bad magic, header, type, Fortran order, or a file shorter
/// than its shape says is a vkt::Error naming the file and the problem.
///
///   vkt::NpyArray x = vkt::read_npy("train_x.npy");   // shape {60000, 784}
NpyArray read_npy(const std::string& path);

/// Writes f32 (`<f4`) or i32 (`<i4`) values with `shape` as a version 1.0 .npy file.
void write_npy(const std::string& path, const std::vector<std::int64_t>& shape,
               const std::vector<float>& values);
void write_npy(const std::string& path, const std::vector<std::int64_t>& shape,
               const std::vector<std::int32_t>& values);

}  // namespace vkt
