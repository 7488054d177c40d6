// The CPU time (user + system) this process has used, in seconds: the
// benchmark drivers' clock. The machine is shared, and CPU time is steadier
// there than wall time. Not here: medians, memory figures.
#pragma once

#include <sys/resource.h>

namespace pipevm::bench {

inline double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds_of = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
}

}  // namespace pipevm::bench
