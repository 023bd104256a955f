#pragma once
// vktower: data-parallel training on every Vulkan device of a machine.
// The one header an application needs:  #include <vktower/vktower.h>

#include "runtime/version.h"

// The Vulkan runtime.
#include "runtime/vulkan/buffer.h"
#include "runtime/vulkan/cache_dir.h"
#include "runtime/vulkan/cross_device_copy.h"
#include "runtime/vulkan/device.h"
#include "runtime/vulkan/device_info.h"
#include "runtime/vulkan/error.h"
#include "runtime/vulkan/instance.h"
#include "runtime/vulkan/kernel.h"
#include "runtime/vulkan/stream.h"
#include "runtime/vulkan/ticket.h"
#include "runtime/vulkan/tuning_cache.h"

// Models: graphs, ops, gradients, execution.
#include "runtime/graph/autodiff.h"
#include "runtime/graph/executor.h"
#include "runtime/graph/frozen_scope.h"
#include "runtime/graph/graph.h"
#include "runtime/graph/half.h"
#include "runtime/graph/ops/batch_norm.h"
#include "runtime/graph/ops/cast.h"
#include "runtime/graph/ops/conv.h"
#include "runtime/graph/ops/cross_replica.h"
#include "runtime/graph/ops/dense_fused.h"
#include "runtime/graph/ops/dropout.h"
#include "runtime/graph/ops/elementwise.h"
#include "runtime/graph/ops/embedding.h"
#include "runtime/graph/ops/layer_norm.h"
#include "runtime/graph/ops/layers.h"
#include "runtime/graph/ops/losses.h"
#include "runtime/graph/ops/matmul.h"
#include "runtime/graph/ops/pool.h"
#include "runtime/graph/ops/reduce.h"
#include "runtime/graph/ops/repeat_kv.h"
#include "runtime/graph/ops/rms_norm.h"
#include "runtime/graph/ops/rotary_embedding.h"
#include "runtime/graph/ops/shape_ops.h"
#include "runtime/graph/ops/softmax.h"
#include "runtime/graph/ops/state_update.h"
#include "runtime/graph/precision_scope.h"

// Files: data sets and checkpoints.
#include "runtime/io/checkpoint.h"
#include "runtime/io/checkpoint_manager.h"
#include "runtime/io/csv.h"
#include "runtime/io/dataset.h"
#include "runtime/io/host_tensor.h"
#include "runtime/io/npy.h"

// Hugging Face model folders: tokenizers.
#include "models/bpe_tokenizer.h"
#include "models/byte_level.h"
#include "models/sentencepiece_tokenizer.h"
#include "models/tokenizer.h"

// Optimizers.
#include "optimizers/adagrad.h"
#include "optimizers/adam.h"
#include "optimizers/ftrl.h"
#include "optimizers/loss_scaler.h"
#include "optimizers/rmsprop.h"
#include "optimizers/schedule.h"
#include "optimizers/sgd.h"
#include "optimizers/tower_optimizer.h"

// Towers and the Estimator.
#include "tower/device_choice.h"
#include "tower/device_list.h"
#include "tower/estimator.h"
#include "tower/hooks.h"
#include "tower/input_fn.h"
#include "tower/metrics.h"
#include "tower/replicate.h"
#include "tower/tower_run.h"
