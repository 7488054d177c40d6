// Ranks of different hosts bound to one CPU of one machine (shared_cpus.hpp).
#include "shared_cpus.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

namespace pipevm::runtime {

namespace {

// "0-3,6": runs of consecutive CPUs.
std::string cpu_list(const std::vector<int>& cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (last > i) text += '-' + std::to_string(cpus[last]);
    i = last + 1;
  }
  return text;
}

bool parse_int(std::string_view text, int& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && value >= 0;
}

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view run = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t dash = run.find('-');
    int first = 0;
    int last = 0;
    if (!parse_int(run.substr(0, dash), first)) return std::nullopt;
    last = first;
    if (dash != std::string_view::npos &&
        (!parse_int(run.substr(dash + 1), last) || last < first)) {
      return std::nullopt;
    }
    if (!cpus.empty() && first <= cpus.back()) return std::nullopt;
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

bool bound(const RankCpus& rank) {
  return static_cast<int>(rank.cpus.size()) < rank.machine_cpus;
}

}  // namespace

RankCpus this_rank_cpus() {
  RankCpus mine;
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  if (!std::getline(boot_id, mine.machine)) mine.machine.clear();
  mine.machine_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (mine.machine_cpus <= 0 || sched_getaffinity(0, sizeof set, &set) != 0) {
    mine.machine.clear();
    return mine;
  }
  for (std::size_t cpu = 0; cpu < static_cast<std::size_t>(CPU_SETSIZE); ++cpu) {
    if (CPU_ISSET(cpu, &set)) mine.cpus.push_back(static_cast<int>(cpu));
  }
  return mine;
}

std::string encode(const RankCpus& cpus) {
  return (cpus.machine.empty() ? "-" : cpus.machine) + ' ' + std::to_string(cpus.machine_cpus) +
         ' ' + cpu_list(cpus.cpus);
}

std::optional<RankCpus> decode(std::string_view text) {
  const std::size_t first_space = text.find(' ');
  const std::size_t second_space = text.find(' ', first_space + 1);
  if (first_space == std::string_view::npos || second_space == std::string_view::npos) {
    return std::nullopt;
  }
  RankCpus cpus;
  const std::string_view machine = text.substr(0, first_space);
  if (machine != "-") cpus.machine = machine;
  const std::string_view count = text.substr(first_space + 1, second_space - first_space - 1);
  std::optional<std::vector<int>> list = parse_cpu_list(text.substr(second_space + 1));
  if (!parse_int(count, cpus.machine_cpus) || !list) return std::nullopt;
  cpus.cpus = std::move(*list);
  return cpus;
}

std::vector<std::string> shared_cpu_warnings(const std::vector<std::string>& host_of_mpi_rank,
                                             const std::vector<RankCpus>& cpus_of_mpi_rank) {
  std::vector<std::string> warnings;
  std::set<std::pair<std::string, std::string>> reported;  // pairs of hosts
  const std::size_t ranks = std::min(host_of_mpi_rank.size(), cpus_of_mpi_rank.size());
  for (std::size_t a = 0; a < ranks; ++a) {
    for (std::size_t b = a + 1; b < ranks; ++b) {
      const RankCpus& first = cpus_of_mpi_rank[a];
      const RankCpus& second = cpus_of_mpi_rank[b];
      const std::string& host_a = host_of_mpi_rank[a];
      const std::string& host_b = host_of_mpi_rank[b];
      if (host_a == host_b || first.machine.empty() || first.machine != second.machine ||
          !bound(first) || !bound(second) || reported.contains({host_a, host_b})) {
        continue;
      }
      std::vector<int> common;
      std::set_intersection(first.cpus.begin(), first.cpus.end(), second.cpus.begin(),
                            second.cpus.end(), std::back_inserter(common));
      if (common.empty()) continue;
      reported.insert({host_a, host_b});
      warnings.push_back(
          "hosts " + host_a + " and " + host_b +
          " are one machine (the same kernel boot id), and " + "MPI ranks " + std::to_string(a) +
          " (" + host_a + ") and " + std::to_string(b) + " (" + host_b + ") are both bound to CPU" +
          (common.size() > 1 ? "s " : " ") + cpu_list(common) + " of its " +
          std::to_string(first.machine_cpus) +
          ": they take turns there; start mpirun with --bind-to none, or give each host "
          "CPUs of its own (docs/multihost.md, \"Hosts that share a machine\")");
    }
  }
  return warnings;
}

}  // namespace pipevm::runtime
