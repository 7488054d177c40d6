// Expansion throughput: expands a schedule for every rank of one
// configuration (default: schedules/1f1b.pipe, P=1024, M=4096, ~25 million
// instructions) several times and prints the median wall time, instructions
// per second and the process's peak resident memory (getrusage). Results are
// recorded in bench/RESULTS.md ("## expand").
//
//   pipevm_expand_bench [FILE] [STAGES] [MICRO_BATCHES] [REPEATS]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "ast.hpp"
#include "compile.hpp"
#include "cpu_time.hpp"

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : PIPEVM_SOURCE_DIR "/schedules/1f1b.pipe";
  pipevm::Config config;
  config.stages = argc > 2 ? std::atoi(argv[2]) : 1024;
  config.micro_batches = argc > 3 ? std::atoi(argv[3]) : 4096;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;

  pipevm::Diagnostics diagnostics;
  const auto file = pipevm::read_source(path, diagnostics);
  const auto schedule = file ? pipevm::parse(file, diagnostics) : nullptr;
  if (!schedule) {
    for (const auto& d : diagnostics.all()) pipevm::print_text(std::cerr, d);
    return 2;
  }
  using pipevm::bench::cpu_seconds;
  // The machine is shared: CPU time (user + system) is the steadier figure.
  std::vector<double> seconds;
  std::vector<double> cpu;
  std::size_t instructions = 0;
  for (int i = 0; i < repeats; ++i) {
    const double cpu_start = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    const auto program = pipevm::expand(*schedule, config, diagnostics);
    const auto stop = std::chrono::steady_clock::now();
    if (!program) {
      for (const auto& d : diagnostics.all()) pipevm::print_text(std::cerr, d);
      return 1;
    }
    instructions = program->code.size();
    seconds.push_back(std::chrono::duration<double>(stop - start).count());
    cpu.push_back(cpu_seconds() - cpu_start);
  }
  std::sort(seconds.begin(), seconds.end());
  std::sort(cpu.begin(), cpu.end());
  const double median = seconds[seconds.size() / 2];
  const double median_cpu = cpu[cpu.size() / 2];
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::cout << "schedule " << path << " stages " << config.stages << " micro_batches "
            << config.micro_batches << "\n"
            << "instructions " << instructions << "\n"
            << "runs " << repeats << " median_seconds " << median << " min " << seconds.front()
            << " max " << seconds.back() << "\n"
            << "median_cpu_seconds " << median_cpu << "\n"
            << "instructions_per_second " << static_cast<double>(instructions) / median
            << " per_cpu_second " << static_cast<double>(instructions) / median_cpu << "\n"
            << "peak_rss_mib " << static_cast<double>(usage.ru_maxrss) / 1024.0 << "\n";
  return 0;
}
