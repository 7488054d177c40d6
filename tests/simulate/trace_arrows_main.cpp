// trace_arrows TRACE.json SCHEDULE.pipe: checks the arrows of a trace that
// `pipevm run --trace` (or `simulate --trace`) wrote for SCHEDULE, as
// Perfetto would import them (trace_arrows.hpp). The configuration is the
// trace's own (otherData). Prints the counts; exit 0 when every arrow lands.
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "compile.hpp"
#include "trace_arrows.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: trace_arrows TRACE.json SCHEDULE.pipe\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  const nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
  if (trace.is_discarded() || !trace.contains("otherData")) {
    std::cerr << argv[1] << ": not a pipevm trace\n";
    return 2;
  }
  const nlohmann::json& about = trace.at("otherData");
  pipevm::Config config;
  config.stages = about.at("stages").get<int>();
  config.micro_batches = about.at("micro_batches").get<int>();
  config.chunks = about.at("chunks").get<int>();
  config.dp = about.at("dp").get<int>();
  pipevm::Diagnostics diagnostics;
  const auto source = pipevm::read_source(argv[2], diagnostics);
  const auto program = source ? pipevm::compile(source, config, diagnostics) : std::nullopt;
  if (!program) {
    for (const pipevm::Diagnostic& d : diagnostics.all()) pipevm::print_text(std::cerr, d);
    return 2;
  }
  const pipevm::testing::ArrowReport report = pipevm::testing::check_trace_arrows(*program, trace);
  std::cout << argv[1] << ": " << report.summary() << '\n';
  for (const std::string& problem : report.problems) std::cout << "  " << problem << '\n';
  return report.all_landed() ? 0 : 1;
}
