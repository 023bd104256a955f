#pragma once
// The Devices towers run on, made once and shared by the models that need them.

#include <cstdint>
#include <memory>
#include <vector>

#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/instance.h"

namespace vkt {

/// Owns the Devices (each with the Instance it was made from) that towers run
/// on. A TowerRun keeps one of its own; an Estimator keeps one for its
/// training, evaluation and prediction models (ModelContext::set_device_pool),
/// so they run on the same Devices, with the same pipelines and memory pools,
/// instead of each making its own. Must outlive every model using it.
///
///   vkt::TowerDevicePool pool;
///   root.set_device_pool(&pool);  // every run built from `root` takes its Devices here
class TowerDevicePool {
 public:
  /// The Device for the tower at `position` of `devices` (indices into
  /// `root`'s devices). Shared: one Device per physical device, with a compute
  /// queue per tower listed on it (as far as offered). Not shared: the k-th
  /// tower on a physical device gets the k-th Device of its own Instance (on
  /// lavapipe, separate instances run concurrently). Made on first use with
  /// `options`, then kept and handed to whoever asks for that place with the
  /// same options (and, shared, as many queues); other options get a Device
  /// of their own, so a staged run never lands on a mapped one.
  Device& device(const Instance& root, const std::vector<std::uint32_t>& devices,
                 std::size_t position, bool shared, const DeviceOptions& options);
  /// The Devices it hands out, in the order they were made (not the lost ones).
  std::vector<Device*> devices() const;
  /// Sets aside the Devices that were lost (Device::lost()), so that a model
  /// built next makes a fresh one where it asks for one again. They are
  /// destroyed with the pool, since other models may still refer to them.
  void forget_lost();
  /// A new Instance whose device `index` is `root`'s device `index`.
  static std::unique_ptr<Instance> own_instance(const Instance& root, std::uint32_t index);

 private:
  struct Owned {
    std::uint32_t index;
    bool shared;
    std::size_t occurrence;  // not shared: the k-th on `index`
    std::unique_ptr<Instance> instance;
    std::unique_ptr<Device> device;
  };
  std::vector<Owned> owned_;
  std::vector<Owned> lost_;  // set aside by forget_lost()
};

}  // namespace vkt
