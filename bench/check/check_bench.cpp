// Checker throughput: expands a schedule once for one configuration (default:
// schedules/1f1b.pipe, P=1024, M=4096, every rank), then runs the checker on
// it several times and prints the median wall and CPU time of `check` alone,
// instructions checked per CPU-second, and the process's peak resident memory
// (getrusage: the Program plus the checker's working set). Expansion is
// benchmarked separately (bench/dsl). Results: bench/RESULTS.md, "## check".
//
//   pipevm_check_bench [FILE] [STAGES] [MICRO_BATCHES] [REPEATS]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "check.hpp"
#include "compile.hpp"
#include "cpu_time.hpp"

namespace {

using pipevm::bench::cpu_seconds;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : PIPEVM_SOURCE_DIR "/schedules/1f1b.pipe";
  pipevm::Config config;
  config.stages = argc > 2 ? std::atoi(argv[2]) : 1024;
  config.micro_batches = argc > 3 ? std::atoi(argv[3]) : 4096;
  const int repeats = std::max(1, argc > 4 ? std::atoi(argv[4]) : 3);

  pipevm::Diagnostics diagnostics;
  const auto program = [&]() -> std::optional<pipevm::Program> {
    const auto file = pipevm::read_source(path, diagnostics);
    if (!file) return std::nullopt;
    return pipevm::compile(file, config, diagnostics);
  }();
  if (!program) {
    for (const auto& d : diagnostics.all()) pipevm::print_text(std::cerr, d);
    return 2;
  }
  std::vector<double> wall, cpu;
  std::size_t findings = 0;
  for (int i = 0; i < repeats; ++i) {
    const double cpu_start = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    const pipevm::CheckResult result = pipevm::check(*program);
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cpu.push_back(cpu_seconds() - cpu_start);
    findings = result.diagnostics.size() + result.suppressed;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double instructions = static_cast<double>(program->code.size());
  std::cout << "file=" << path << " stages=" << config.stages
            << " micro_batches=" << config.micro_batches << " instructions=" << program->code.size()
            << " findings=" << findings << " repeats=" << repeats
            << " median_wall_s=" << median(wall) << " median_cpu_s=" << median(cpu)
            << " instructions_per_cpu_s=" << instructions / median(cpu)
            << " peak_rss_mib=" << static_cast<double>(usage.ru_maxrss) / 1024.0 << '\n';
  return findings == 0 ? 0 : 1;
}
