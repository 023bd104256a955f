#pragma once
// The check that every process of a job built the same model.

#include <string>
#include <vector>

namespace vkt {

class ProcessGroup;

/// Compares every rank's model description (one line per fact: the towers,
/// the inputs, each variable's name and shape, each optimizer call) with rank
/// 0's, before any collective that a mismatch would hang. Collective. Throws
/// the same vkt::Error on every rank when they differ, naming the first rank
/// that differs and its first differing line beside rank 0's.
void check_same_model(ProcessGroup& processes, const std::vector<std::string>& description);

}  // namespace vkt
