// What a run says, and where: its log lines on `out` (rank 0's header,
// epochs, digest), a progress bar redrawn in place, and errors and
// warnings on `err` as "pipevm run: error: ...". The front door gives the
// streams and whether to colour diagnostics (cli/ gives stdout and stderr);
// the steps never write to a stream of their own.
#pragma once

#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "diagnostics.hpp"
#include "model_shape.hpp"

namespace pipevm {
struct EpochReport;  // trainer.hpp
}

namespace pipevm::train {

class RunLog {
 public:
  RunLog(std::FILE* out, std::ostream& err, bool color) : out_(out), err_(err), color_(color) {}

  std::FILE* out() const { return out_; }
  std::ostream& err() const { return err_; }
  // "pipevm run: error: MESSAGE", a line of its own.
  void error(const std::string& message) const;
  void warning(const std::string& message) const;
  void diagnostics(const std::vector<Diagnostic>& found) const;
  // "epoch 2/5  loss 0.4321  test accuracy 84.10%  ... elapsed 12.3 s".
  void epoch(const EpochReport& report, int epochs, double elapsed_seconds) const;

 private:
  std::FILE* out_;
  std::ostream& err_;
  bool color_;
};

// Redraws "epoch 2/3 [#####.....] 120/398" in place on a terminal, only
// when the bar grows, so that a log of it stays short.
class ProgressBar {
 public:
  ProgressBar(std::FILE* out, bool enabled) : out_(out), enabled_(enabled) {}
  void show(int epoch, int epochs, int done, int total);
  void clear();

 private:
  static constexpr int kWidth = 30;
  std::FILE* out_;
  bool enabled_;
  int drawn_ = -1;
};

// Who chose a run's cut: run's own rule (measured time or multiply-adds),
// the checkpoint a run resumes from, or the program's `cut` declaration.
enum class SplitOrigin { rule, checkpoint, program };

// "layers 0-1 | 2-6, split by measured time 48% | 52%" (or by multiply-adds,
// or as the checkpoint a run resumes from was, or as the program's cut
// declares).
std::string describe_split(const std::vector<LayerRange>& split,
                           const std::vector<double>& layer_costs, SplitOrigin origin);

}  // namespace pipevm::train
