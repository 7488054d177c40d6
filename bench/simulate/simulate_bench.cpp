// Simulation throughput: compiles a schedule for one configuration once, then
// simulates it several times with the default costs and prints the median
// CPU time, instructions per CPU second and peak resident memory. Run it at
// two sizes to see that time grows linearly with the instruction count.
// Results are recorded in bench/RESULTS.md ("## simulate").
//
//   pipevm_simulate_bench [FILE] [STAGES] [MICRO_BATCHES] [CHUNKS] [REPEATS]
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "compile.hpp"
#include "cpu_time.hpp"
#include "simulate.hpp"

using pipevm::bench::cpu_seconds;

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : PIPEVM_SOURCE_DIR "/schedules/1f1b.pipe";
  pipevm::Config config;
  config.stages = argc > 2 ? std::atoi(argv[2]) : 128;
  config.micro_batches = argc > 3 ? std::atoi(argv[3]) : 1024;
  config.chunks = argc > 4 ? std::atoi(argv[4]) : 1;
  const int repeats = argc > 5 ? std::atoi(argv[5]) : 3;

  pipevm::Diagnostics diagnostics;
  const auto file = pipevm::read_source(path, diagnostics);
  const auto program = file ? pipevm::compile(file, config, diagnostics) : std::nullopt;
  if (!program) {
    for (const auto& d : diagnostics.all()) pipevm::print_text(std::cerr, d);
    return 2;
  }
  std::vector<double> cpu;
  double bubble = 0;
  for (int i = 0; i < repeats; ++i) {
    const double start = cpu_seconds();
    const auto simulation = pipevm::simulate(*program, pipevm::default_costs(), diagnostics);
    cpu.push_back(cpu_seconds() - start);
    if (!simulation) {
      for (const auto& d : diagnostics.all()) pipevm::print_text(std::cerr, d);
      return 1;
    }
    bubble = simulation->bubble_fraction;
  }
  std::sort(cpu.begin(), cpu.end());
  const double median = cpu[cpu.size() / 2];
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto instructions = static_cast<double>(program->code.size());
  std::cout << "schedule " << path << " stages " << config.stages << " micro_batches "
            << config.micro_batches << " chunks " << config.chunks << "\n"
            << "instructions " << program->code.size() << " bubble " << bubble << "\n"
            << "runs " << repeats << " median_cpu_seconds " << median << " min " << cpu.front()
            << " max " << cpu.back() << "\n"
            << "instructions_per_cpu_second " << instructions / median << "\n"
            << "peak_rss_mib " << static_cast<double>(usage.ru_maxrss) / 1024.0 << "\n";
  return 0;
}
