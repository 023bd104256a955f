#pragma once
// vktower: data-parallel training on every Vulkan device of a machine.
// The one header an application needs:  #include <vktower/vktower.h>

#include "runtime/version.h"
#include "runtime/vulkan/buffer.h"
#include "runtime/vulkan/cross_device_copy.h"
#include "runtime/vulkan/device.h"
#include "runtime/vulkan/device_info.h"
#include "runtime/vulkan/error.h"
#include "runtime/vulkan/instance.h"
#include "runtime/vulkan/kernel.h"
#include "runtime/vulkan/stream.h"
#include "runtime/vulkan/ticket.h"
