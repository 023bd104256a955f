#include "spirv_reflect.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "../error.h"

namespace vkt::detail {
namespace {

// SPIR-V opcodes, decorations and enums used below (SPIR-V 1.3 specification).
enum : std::uint32_t {
  OpName = 5,
  OpEntryPoint = 15,
  OpExecutionMode = 16,
  OpTypeInt = 21,
  OpTypeFloat = 22,
  OpTypeVector = 23,
  OpTypeMatrix = 24,
  OpTypeImage = 25,
  OpTypeSampledImage = 27,
  OpTypeArray = 28,
  OpTypeStruct = 30,
  OpTypePointer = 32,
  OpConstant = 43,
  OpSpecConstantTrue = 48,
  OpSpecConstantFalse = 49,
  OpSpecConstant = 50,
  OpSpecConstantComposite = 51,
  OpVariable = 59,
  OpDecorate = 71,
  OpMemberDecorate = 72,
  OpExecutionModeId = 331,
};
enum : std::uint32_t {
  DecorationSpecId = 1,
  DecorationBlock = 2,
  DecorationBufferBlock = 3,
  DecorationArrayStride = 6,
  DecorationBuiltIn = 11,
  DecorationNonWritable = 24,
  DecorationBinding = 33,
  DecorationDescriptorSet = 34,
  DecorationOffset = 35,
};
enum : std::uint32_t {
  StorageUniformConstant = 0,
  StorageUniform = 2,
  StoragePushConstant = 9,
  StorageStorageBuffer = 12,
};
constexpr std::uint32_t kExecutionModelGLCompute = 5;
constexpr std::uint32_t kModeLocalSize = 17;
constexpr std::uint32_t kModeLocalSizeId = 38;
constexpr std::uint32_t kBuiltInWorkgroupSize = 25;
constexpr std::uint32_t kDimBuffer = 5;

struct Module {
  std::map<std::uint32_t, std::vector<std::uint32_t>> types;       // id -> whole instruction
  std::map<std::uint32_t, std::uint32_t> constants;                // id -> first literal word
  std::map<std::uint32_t, std::uint32_t> spec_id_of;               // id -> SpecId
  std::map<std::uint32_t, std::vector<std::uint32_t>> composites;  // spec composite constituents
  std::map<std::uint32_t, std::map<std::uint32_t, std::uint32_t>>
      decorations;  // id -> deco -> value
  std::map<std::uint32_t, std::map<std::uint32_t, std::uint32_t>> member_offsets;
  std::map<std::uint32_t, std::set<std::uint32_t>> non_writable_members;
  std::map<std::uint32_t, std::string> names;
  struct Variable {
    std::uint32_t id, pointer_type, storage;
  };
  std::vector<Variable> variables;
};

std::string literal_string(std::span<const std::uint32_t> words) {
  std::string s;
  for (std::uint32_t w : words) {
    for (int b = 0; b < 4; ++b) {
      const char c = static_cast<char>((w >> (8 * b)) & 0xff);
      if (c == '\0') return s;
      s.push_back(c);
    }
  }
  return s;
}

std::uint32_t size_of(const Module& m, std::uint32_t type_id, const std::string& shader) {
  auto it = m.types.find(type_id);
  if (it == m.types.end())
    throw Error(fmt::format("shader '{}': unknown type %{}", shader, type_id));
  const std::vector<std::uint32_t>& t = it->second;
  switch (t[0] & 0xffff) {
    case OpTypeInt:
    case OpTypeFloat:
      return t[2] / 8;
    case OpTypeVector:
    case OpTypeMatrix:
      return t[3] * size_of(m, t[2], shader);
    case OpTypeArray: {
      const std::uint32_t length = m.constants.at(t[3]);
      auto stride = m.decorations.find(t[1]);
      if (stride != m.decorations.end() && stride->second.count(DecorationArrayStride)) {
        return length * stride->second.at(DecorationArrayStride);
      }
      return length * size_of(m, t[2], shader);
    }
    case OpTypeStruct: {
      std::uint32_t end = 0;
      const auto& offsets = m.member_offsets.count(t[1]) ? m.member_offsets.at(t[1])
                                                         : std::map<std::uint32_t, std::uint32_t>{};
      for (std::uint32_t member = 0; member + 2 < t.size(); ++member) {
        const std::uint32_t offset = offsets.count(member) ? offsets.at(member) : 0;
        end = std::max(end, offset + size_of(m, t[member + 2], shader));
      }
      return end;
    }
    default:
      throw Error(
          fmt::format("shader '{}': push constants hold a type vktower cannot size "
                      "(opcode {}); use scalars, vectors and arrays of them",
                      shader, t[0] & 0xffff));
  }
}

}  // namespace

ReflectedShader reflect(std::span<const std::uint32_t> words, const std::string& shader) {
  if (words.size() < 5 || words[0] != 0x07230203u) {
    throw Error(fmt::format("shader '{}' is not SPIR-V (bad magic number)", shader));
  }
  Module m;
  ReflectedShader out;
  bool compute = false;
  for (std::size_t at = 5; at < words.size();) {
    const std::uint32_t count = words[at] >> 16;
    const std::uint32_t op = words[at] & 0xffff;
    if (count == 0 || at + count > words.size()) {
      throw Error(fmt::format("shader '{}': truncated SPIR-V at word {}", shader, at));
    }
    const std::span<const std::uint32_t> in = words.subspan(at, count);
    switch (op) {
      case OpName:
        m.names[in[1]] = literal_string(in.subspan(2));
        break;
      case OpEntryPoint:
        compute = compute || in[1] == kExecutionModelGLCompute;
        break;
      case OpExecutionMode:
        if (in[2] == kModeLocalSize) out.local_size = {in[3], in[4], in[5]};
        break;
      case OpExecutionModeId:
        if (in[2] == kModeLocalSizeId) {
          for (int i = 0; i < 3; ++i) {
            if (m.spec_id_of.count(in[3 + i])) out.local_size_ids[i] = m.spec_id_of.at(in[3 + i]);
            if (m.constants.count(in[3 + i])) out.local_size[i] = m.constants.at(in[3 + i]);
          }
        }
        break;
      case OpTypeInt:
      case OpTypeFloat:
      case OpTypeVector:
      case OpTypeMatrix:
      case OpTypeImage:
      case OpTypeSampledImage:
      case OpTypeArray:
      case OpTypeStruct:
      case OpTypePointer:
        m.types[in[1]] = std::vector<std::uint32_t>(in.begin(), in.end());
        break;
      case OpConstant:
      case OpSpecConstant:
        m.constants[in[2]] = in[3];
        break;
      case OpSpecConstantTrue:
      case OpSpecConstantFalse:
        m.constants[in[2]] = op == OpSpecConstantTrue ? 1 : 0;
        break;
      case OpSpecConstantComposite:
        m.composites[in[2]] = std::vector<std::uint32_t>(in.begin() + 3, in.end());
        break;
      case OpVariable:
        m.variables.push_back({in[2], in[1], in[3]});
        break;
      case OpDecorate:
        m.decorations[in[1]][in[2]] = count > 3 ? in[3] : 1;
        if (in[2] == DecorationSpecId) m.spec_id_of[in[1]] = in[3];
        break;
      case OpMemberDecorate:
        if (in[3] == DecorationOffset) m.member_offsets[in[1]][in[2]] = in[4];
        if (in[3] == DecorationNonWritable) m.non_writable_members[in[1]].insert(in[2]);
        break;
      default:
        break;
    }
    at += count;
  }
  if (!compute) throw Error(fmt::format("shader '{}' has no GLCompute entry point", shader));

  for (const auto& [id, spec] : m.spec_id_of) out.spec_ids.push_back(spec);
  std::sort(out.spec_ids.begin(), out.spec_ids.end());

  // glslang's local_size_x_id: a spec-constant composite decorated BuiltIn WorkgroupSize.
  for (const auto& [id, parts] : m.composites) {
    auto deco = m.decorations.find(id);
    if (deco == m.decorations.end() || !deco->second.count(DecorationBuiltIn) ||
        deco->second.at(DecorationBuiltIn) != kBuiltInWorkgroupSize || parts.size() != 3) {
      continue;
    }
    for (int i = 0; i < 3; ++i) {
      if (m.spec_id_of.count(parts[i])) out.local_size_ids[i] = m.spec_id_of.at(parts[i]);
      if (m.constants.count(parts[i])) out.local_size[i] = m.constants.at(parts[i]);
    }
  }

  for (const Module::Variable& v : m.variables) {
    const std::vector<std::uint32_t>& pointer = m.types.at(v.pointer_type);
    const std::uint32_t pointee = pointer[3];
    if (v.storage == StoragePushConstant) {
      out.push_constant_bytes = size_of(m, pointee, shader);
      continue;
    }
    auto deco = m.decorations.find(v.id);
    if (deco == m.decorations.end() || !deco->second.count(DecorationBinding)) continue;
    ReflectedBinding b;
    b.binding = deco->second.at(DecorationBinding);
    b.set =
        deco->second.count(DecorationDescriptorSet) ? deco->second.at(DecorationDescriptorSet) : 0;
    b.name = m.names.count(pointee) && !m.names.at(pointee).empty() ? m.names.at(pointee)
                                                                    : m.names[v.id];
    const auto& type_decos = m.decorations[pointee];
    const std::vector<std::uint32_t>* type_ptr = &m.types.at(pointee);
    // samplerBuffer: a sampled image wrapping the buffer image.
    if (((*type_ptr)[0] & 0xffff) == OpTypeSampledImage) type_ptr = &m.types.at((*type_ptr)[2]);
    const std::vector<std::uint32_t>& type = *type_ptr;
    if (v.storage == StorageStorageBuffer ||
        (v.storage == StorageUniform && type_decos.count(DecorationBufferBlock))) {
      b.kind = BindingKind::StorageBuffer;
      const std::size_t members = type.size() - 2;
      b.read_only = deco->second.count(DecorationNonWritable) ||
                    (members > 0 && m.non_writable_members[pointee].size() == members);
    } else if (v.storage == StorageUniform) {
      b.kind = BindingKind::UniformBuffer;
      b.read_only = true;
    } else if (v.storage == StorageUniformConstant && (type[0] & 0xffff) == OpTypeImage &&
               type[3] == kDimBuffer) {
      b.kind = type[7] == 2 ? BindingKind::StorageTexelBuffer : BindingKind::UniformTexelBuffer;
      b.read_only =
          b.kind == BindingKind::UniformTexelBuffer || deco->second.count(DecorationNonWritable);
    } else {
      throw Error(
          fmt::format("shader '{}': binding {} is neither a buffer nor a texel buffer; "
                      "vktower kernels take buffers only",
                      shader, b.binding));
    }
    out.bindings.push_back(b);
  }
  std::sort(
      out.bindings.begin(), out.bindings.end(),
      [](const ReflectedBinding& a, const ReflectedBinding& b) { return a.binding < b.binding; });
  for (std::size_t i = 0; i < out.bindings.size(); ++i) {
    if (out.bindings[i].set != 0 || out.bindings[i].binding != i) {
      throw Error(
          fmt::format("shader '{}': bindings must be set 0, numbered 0, 1, 2, ... without "
                      "gaps (found set {} binding {})",
                      shader, out.bindings[i].set, out.bindings[i].binding));
    }
  }
  return out;
}

}  // namespace vkt::detail
