// A schedule of schedules/ parsed, for fuzz targets that feed their input
// through a real schedule (topology: gossip.pipe; torch_csv: the schedules
// that have a PyTorch table). The source directory is PIPEVM_SOURCE_DIR,
// which fuzz/CMakeLists.txt defines for every target. A schedule that does
// not parse is a broken build, not a finding: it aborts.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "ast.hpp"
#include "compile.hpp"
#include "fuzz_support.hpp"

inline std::shared_ptr<const pipevm::Schedule> shipped_schedule(const std::string& name) {
  const std::string path = std::string(PIPEVM_SOURCE_DIR) + "/schedules/" + name;
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  pipevm::Diagnostics diagnostics;
  auto schedule =
      pipevm::parse(std::make_shared<const pipevm::SourceFile>(path, text.str()), diagnostics);
  FUZZ_ASSERT(schedule != nullptr, "a shipped schedule parses");
  return schedule;
}
