// What a run says, and where: its log lines on `out` (rank 0's header,
// epochs, digest), a progress bar redrawn in place, and errors and
// warnings on `err` as "pipevm run: error: ...". The front door gives the
// streams and whether to colour diagnostics (cli/ gives stdout and stderr);
// the steps never write to a stream of their own.
#pragma once

#include <chrono>
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
  // "epoch 2/5  loss 0.4321  test accuracy 84.10%  ... elapsed 12.3 s", then
  // "  12 s left" while epochs remain (`seconds_left` >= 0).
  void epoch(const EpochReport& report, int epochs, double elapsed_seconds,
             double seconds_left = -1) const;

 private:
  std::FILE* out_;
  std::ostream& err_;
  bool color_;
};

// How a run shows its progress within an epoch: a bar redrawn in place (a
// terminal), a line every kLineSeconds (a log: output not a terminal, or
// under mpirun, whose ranks see a terminal even when its output is a
// file), or nothing (--no-progress).
enum class ProgressStyle { none, bar, lines };

// "epoch 2/3 [#####.....] 120/398  40 s left" redrawn in place, only when
// the bar grows or a second passed; or "epoch 2/3: 120/398 steps, 4100
// samples/s, 40 s left" as a line of its own every kLineSeconds. Time left
// is the rate so far over the steps this run still takes.
class ProgressBar {
 public:
  static constexpr double kLineSeconds = 30;

  ProgressBar(std::FILE* out, ProgressStyle style, int samples_per_step, int steps_left)
      : out_(out),
        style_(style),
        samples_per_step_(samples_per_step),
        steps_left_(steps_left),
        start_(std::chrono::steady_clock::now()),
        last_(start_) {}
  // Step `done` of `total` of epoch `epoch` (1-based) of `epochs` is over.
  void show(int epoch, int epochs, int done, int total);
  void clear();

 private:
  static constexpr int kWidth = 30;
  std::FILE* out_;
  ProgressStyle style_;
  int samples_per_step_;
  int steps_left_;  // steps this run takes in all
  int steps_done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;  // the last line or redraw
  int drawn_ = -1;
};

// Who chose a run's cut: run's own rule (measured time or multiply-adds)
// or the program's `cut` declaration.
enum class SplitOrigin { rule, program };

// "layers 0-1 | 2-6, split by measured time 48% | 52%" (or by multiply-adds,
// or as the program's cut declares).
std::string describe_split(const std::vector<LayerRange>& split,
                           const std::vector<double>& layer_costs, SplitOrigin origin);

}  // namespace pipevm::train
