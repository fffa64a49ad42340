// CUPTI kernel attribution (README "How it runs"): which kernels ran during one probe repeat.
// One process-wide tracer (CUPTI allows one subscriber); started lazily on the first trace_begin.
// When CUPTI cannot start (another profiler attached: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
// no permission to profile, no device) every call answers unavailable("tracing unavailable: ...")
// and nothing else fails.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace detaudit::gpu {

class CuptiTracer {
 public:
  static CuptiTracer& instance();

  // ok once CUPTI started (starting it on the first call), else unavailable with the reason.
  Status available();
  // Drains earlier records, then tags every CUDA call of this thread with `repeat_id`.
  Status begin(uint64_t repeat_id);
  // Synchronises the device, flushes CUPTI and returns the kernels launched under `repeat_id`, in
  // start order.
  Status end(uint64_t repeat_id, std::vector<KernelRecord>* kernels);

 private:
  CuptiTracer() = default;
  Status start();
  std::once_flag started_;
  Status start_status_;
};

// CUPTI's API version as a string ("130001"), or "" when CUPTI does not answer.
std::string cupti_version_string();

}  // namespace detaudit::gpu
