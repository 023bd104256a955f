#include "stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <mutex>

namespace vkt {
namespace {

// Process-wide by nature: a signal disposition belongs to the process.
volatile std::sig_atomic_t g_pending = 0;
std::mutex g_mutex;
int g_guards = 0;
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

extern "C" void note_stop(int signal) {
  g_pending = signal;
}

}  // namespace

StopSignals::StopSignals() {
  const std::lock_guard lock(g_mutex);
  if (g_guards++ > 0) return;
  g_pending = 0;
  struct sigaction action {};
  action.sa_handler = note_stop;
  sigemptyset(&action.sa_mask);
  // One-shot: the second Ctrl-C finds the default action and ends the process.
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  const std::lock_guard lock(g_mutex);
  if (--g_guards > 0) return;
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int StopSignals::pending() {
  return g_pending;
}

const char* StopSignals::describe(int signal) {
  return signal == SIGINT ? "Ctrl-C (SIGINT)" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

void StopSignals::end_process(int signal) {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(signal);
  ::_exit(128 + signal);  // not reached: the default action of SIGINT and SIGTERM ends us
}

}  // namespace vkt
