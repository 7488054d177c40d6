// The start-up measurement of link_costs.hpp.
#include "link_costs.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>

#include "host_copies.hpp"
#include "link_probe.hpp"

namespace pipevm::train {

namespace {

// Enough for a stable median on an idle link, a few milliseconds in all.
constexpr int kRoundTrips = 15;
// The smallest message worth timing: latency alone.
constexpr std::size_t kLatencyFloats = 2;

std::vector<runtime::ProbeTiming> gather_timings(runtime::Comm& comm,
                                                 const std::vector<runtime::ProbeTiming>& mine) {
  std::vector<std::size_t> counts;
  const std::vector<std::byte> bytes =
      comm.gather_to_root(std::as_bytes(std::span<const runtime::ProbeTiming>(mine)), counts);
  std::vector<runtime::ProbeTiming> all(bytes.size() / sizeof(runtime::ProbeTiming));
  if (!all.empty()) std::memcpy(all.data(), bytes.data(), all.size() * sizeof(all[0]));
  return all;
}

}  // namespace

MeasuredLinks measure_links(runtime::Comm& comm, const std::vector<std::string>& hosts,
                            const std::vector<int>& widths, const std::vector<LayerRange>& split,
                            int rows) {
  // An activation and its gradient have the width of the cut they cross.
  std::size_t largest_cut = 0;
  for (std::size_t piece = 0; piece + 1 < split.size(); ++piece) {
    const auto cut = static_cast<std::size_t>(split[piece].end);
    largest_cut = std::max(largest_cut, static_cast<std::size_t>(widths[cut]));
  }
  const std::array<std::size_t, 2> sizes = {
      kLatencyFloats, std::max(kLatencyFloats, largest_cut * static_cast<std::size_t>(rows))};
  const std::vector<runtime::ProbeTiming> all =
      gather_timings(comm, runtime::probe_pipeline_links(comm, sizes, kRoundTrips));

  std::vector<MessageTiming> same_host;
  std::vector<MessageTiming> across_hosts;
  for (const runtime::ProbeTiming& t : all) {
    const bool one_host = hosts.empty() || hosts[static_cast<std::size_t>(t.rank)] ==
                                               hosts[static_cast<std::size_t>(t.peer)];
    (one_host ? same_host : across_hosts).push_back({t.bytes, t.one_way_us});
  }
  MeasuredLinks links;
  if (!same_host.empty()) links.same_host = fit_link(same_host);
  if (!across_hosts.empty()) links.across_hosts = fit_link(across_hosts);
  // The host link (Offload, Reload): the rank's own copies, latency alone
  // and a micro-batch's activations through every layer of the model.
  std::size_t every_layer = 0;
  for (const int width : widths) every_layer += static_cast<std::size_t>(width);
  const std::array<std::size_t, 2> copy_sizes = {
      kLatencyFloats, std::max(kLatencyFloats, every_layer * static_cast<std::size_t>(rows))};
  const std::vector<double> copy_times = runtime::time_host_copies(copy_sizes, kRoundTrips);
  std::vector<MessageTiming> host_memory;
  for (std::size_t i = 0; i < copy_sizes.size(); ++i) {
    host_memory.push_back({static_cast<double>(copy_sizes[i]) * sizeof(float), copy_times[i]});
  }
  links.host_memory = fit_link(host_memory);
  return links;
}

}  // namespace pipevm::train
