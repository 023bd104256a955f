// The Executor's host side of the data: feeding inputs (checked against the
// graph, then copied into the feed buffer) and reading fetched tensors back.
#include <fmt/format.h>

#include <cstring>

#include "../vulkan/error.h"
#include "executor.h"
#include "half.h"

namespace vkt {

Tensor Executor::input_named(const std::string& name) const {
  const std::optional<Tensor> input = graph_->find_input(name);
  if (!input) throw Error(fmt::format("feed: the graph has no input named '{}'", name));
  return *input;
}

void Executor::feed_bytes(const Tensor& input, std::span<const std::byte> bytes, DType dtype,
                          std::size_t count) {
  const std::string& name = input.name();
  auto place = places_.find(input.id());
  if (place == places_.end()) {
    throw Error(fmt::format("feed: input '{}' is not used by this Executor's fetches", name));
  }
  if (input.dtype() != dtype) {
    throw Error(fmt::format("feed: input '{}' holds {} values, {} were given", name,
                            to_string(input.dtype()), to_string(dtype)));
  }
  // Values, not bytes: a half input's padding to whole words must not make a count fit.
  if (static_cast<std::int64_t>(count) != input.shape().elements()) {
    throw Error(fmt::format("feed: input '{}' has shape {} ({} values) but {} values were given",
                            name, input.shape().str(), input.shape().elements(), count));
  }
  if (options_.double_buffered_feeds) {
    feed_copied_[next_feed_].wait();  // the copy that last read this buffer
  } else {
    last_.wait();  // the last run may still read the old values
  }
  std::memcpy(feed_host().data() + place->second.offset, bytes.data(), bytes.size());
  const auto [entry, first] = fed_.try_emplace(name, runs_ + 1);
  if (first || entry->second != runs_ + 1) ++fresh_;
  entry->second = runs_ + 1;
}

bool Executor::takes_input(const std::string& name) const {
  const std::optional<Tensor> input = graph_->find_input(name);
  return input && places_.count(input->id()) > 0;
}

void Executor::feed(const std::string& name, std::span<const float> values) {
  const Tensor input = input_named(name);
  if (!is_half(input.dtype())) {
    feed_bytes(input, std::as_bytes(values), DType::F32, values.size());
    return;
  }
  // Rounded to the input's type here, as the device's cast would.
  const std::vector<std::uint16_t> bits = to_half_words(values, input.dtype());
  feed_bytes(input, std::as_bytes(std::span(bits)), input.dtype(), values.size());
}
void Executor::feed(const std::string& name, std::span<const std::int32_t> values) {
  feed_bytes(input_named(name), std::as_bytes(values), DType::I32, values.size());
}

void Executor::check_fetched(const Tensor& t) const {
  const TensorInfo& info = graph_->info(t);
  if (info.kind == TensorKind::Variable || info.gradient_of >= 0) return;
  for (const Tensor& f : fetches_) {
    if (f == t) return;
  }
  throw Error(
      fmt::format("read: '{}' was not fetched by this Executor, so its memory may have been "
                  "reused; add it to the fetches",
                  info.name));
}

std::vector<float> Executor::read(const Tensor& tensor) {
  check_fetched(tensor);
  if (tensor.dtype() == DType::I32) throw Error("read: the tensor holds i32 values; use read_i32");
  last_.wait();
  const BufferRange r = range(tensor);
  if (is_half(tensor.dtype())) {
    std::vector<std::uint16_t> bits(r.size() / 2);
    r.buffer->download(std::as_writable_bytes(std::span(bits)), r.offset);
    bits.resize(static_cast<std::size_t>(tensor.shape().elements()));
    return from_half(bits, tensor.dtype());
  }
  std::vector<float> values(r.size() / 4);
  r.buffer->download(std::as_writable_bytes(std::span<float>(values)), r.offset);
  return values;
}

std::vector<std::int32_t> Executor::read_i32(const Tensor& tensor) {
  check_fetched(tensor);
  if (tensor.dtype() != DType::I32) {
    throw Error(
        fmt::format("read_i32: the tensor holds {} values; use read", to_string(tensor.dtype())));
  }
  last_.wait();
  const BufferRange r = range(tensor);
  std::vector<std::int32_t> values(r.size() / 4);
  r.buffer->download(std::as_writable_bytes(std::span<std::int32_t>(values)), r.offset);
  return values;
}

}  // namespace vkt
