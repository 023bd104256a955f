#pragma once
// Ctrl-C and SIGTERM while the Estimator trains: the step under way finishes,
// a checkpoint is saved, and the process then ends by the same signal.

namespace vkt {

/// While one lives, SIGINT and SIGTERM only note that a stop was asked for
/// (pending()); the Estimator checks after each step. A second signal ends the
/// process at once, as if none were handled (the handler is one-shot). Nested
/// guards share one installation; the last one restores the handlers it found.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// The signal that asked to stop (SIGINT or SIGTERM), 0 when none has.
  static int pending();
  /// "Ctrl-C (SIGINT)" or "SIGTERM".
  static const char* describe(int signal);
  /// Ends the process by `signal` with its default action, so the parent sees
  /// what it sent (a shell reports 130 for SIGINT, 143 for SIGTERM).
  [[noreturn]] static void end_process(int signal);
};

}  // namespace vkt
