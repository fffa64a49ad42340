// The tool's interrupt handlers for the length of a test's scope: installed on entry (so a ::raise(SIGINT)
// in the test sets the flag the code under test watches), and on exit the flag cleared and the handlers the
// test process had restored.
#pragma once
#include <csignal>

#include "probes/child.hpp"

namespace detaudit::test {

class InterruptScope {
 public:
  InterruptScope() {
    for (int i = 0; i < 4; ++i) sigaction(kSignals[i], nullptr, &saved_[i]);
    install_interrupt_handlers();
  }
  ~InterruptScope() {
    clear_interrupted();
    for (int i = 0; i < 4; ++i) sigaction(kSignals[i], &saved_[i], nullptr);
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  static constexpr int kSignals[4] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
  struct sigaction saved_[4];
};

}  // namespace detaudit::test
