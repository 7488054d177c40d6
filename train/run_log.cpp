// The run's log (run_log.hpp).
#include "run_log.hpp"

#include <sstream>

#include "trainer.hpp"

namespace pipevm::train {

void RunLog::error(const std::string& message) const {
  err_ << "pipevm run: error: " << message << "\n";
}

void RunLog::warning(const std::string& message) const {
  err_ << "pipevm run: warning: " << message << "\n";
}

void RunLog::diagnostics(const std::vector<Diagnostic>& found) const {
  for (const Diagnostic& d : found) print_text(err_, d, color_);
}

void RunLog::epoch(const EpochReport& report, int epochs, double elapsed_seconds) const {
  std::string test = "n/a";
  if (report.test_accuracy) {
    std::ostringstream text;
    text.precision(2);
    text << std::fixed << 100.0 * *report.test_accuracy << "%";
    test = text.str();
  }
  std::fprintf(out_,
               "epoch %d/%d  loss %.4f  test accuracy %s  %.0f samples/s  %.3f s/epoch  elapsed "
               "%.1f s\n",
               report.epoch + 1, epochs, report.train_loss, test.c_str(), report.samples_per_second,
               report.train_seconds, elapsed_seconds);
  std::fflush(out_);
}

void ProgressBar::show(int epoch, int epochs, int done, int total) {
  if (!enabled_ || total <= 0) return;
  const int filled = done * kWidth / total;
  if (filled == drawn_ && done != total) return;
  drawn_ = filled;
  std::fprintf(out_, "\repoch %d/%d [%s%s] %d/%d", epoch, epochs,
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done, total);
  std::fflush(out_);
}

void ProgressBar::clear() {
  if (!enabled_) return;
  drawn_ = -1;
  std::fprintf(out_, "\r%*s\r", 60, "");
  std::fflush(out_);
}

std::string describe_split(const std::vector<LayerRange>& split,
                           const std::vector<double>& layer_costs, SplitOrigin origin) {
  std::string layers = "layers ";
  std::string shares;
  double total = 0.0;
  for (const double cost : layer_costs) total += cost;
  for (const LayerRange& piece : split) {
    const std::string separator = piece.begin == 0 ? "" : " | ";
    layers += separator + std::to_string(piece.begin);
    if (piece.size() > 1) layers += "-" + std::to_string(piece.end - 1);
    if (total > 0.0) {
      double cost = 0.0;
      for (int layer = piece.begin; layer < piece.end; ++layer) {
        cost += layer_costs[static_cast<std::size_t>(layer)];
      }
      shares += separator + std::to_string(static_cast<int>(100.0 * cost / total + 0.5)) + "%";
    }
  }
  if (split.size() == 1) return "one piece";
  if (origin == SplitOrigin::checkpoint) return layers + ", as in the checkpoint";
  if (origin == SplitOrigin::program) return layers + ", as the program's cut declares";
  return layers + (total > 0.0 ? ", split by measured time " + shares : ", split by multiply-adds");
}

}  // namespace pipevm::train
