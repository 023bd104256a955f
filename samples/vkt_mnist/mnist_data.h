#pragma once
// Reading samples/data/mnist10k.csv.gz (a header line, then per row the label
// 0..9 and 784 pixels 0..255) as images for a convolutional network.

#include <fmt/format.h>

#include <vktower/vktower.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace mnist {

constexpr std::int64_t kSide = 28;
constexpr std::int64_t kPixels = kSide * kSide;

/// The digits of `path` as "x" [N, 28, 28, 1] (pixels / 255, so in [0, 1])
/// and "y" [N] (i32 class ids below `classes`). A file whose rows are not a
/// label and 784 pixels is a vkt::Error naming it; read_csv and from_csv name
/// a bad cell or a label outside the classes with its row.
inline vkt::Dataset load_images(const std::string& path, std::int64_t classes) {
  // The label is the first column, after a header line (label,p0,...,p783).
  const vkt::CsvTable table = vkt::read_csv(path, {.skip_lines = 1, .label_index = 0});
  if (table.features != kPixels) {
    throw vkt::Error(
        fmt::format("{} has {} pixel columns per row after the label; MNIST rows have a label "
                    "and {} pixels (28x28, row-major), after one header line",
                    path, table.features, kPixels));
  }
  const vkt::Dataset flat =
      vkt::Dataset::from_csv(table, {.integer_labels = true, .classes = classes, .source = path})
          .map("x", [](std::span<float> pixels) {
            for (float& p : pixels) p /= 255.0f;
          });
  // NHWC with one channel: the shape conv2d takes. Same values, new shape.
  vkt::HostBatch columns = flat.columns();
  vkt::HostTensor& x = columns.at("x");
  x.shape = vkt::Shape({x.rows(), kSide, kSide, 1});
  return vkt::Dataset(std::move(columns));
}

}  // namespace mnist
