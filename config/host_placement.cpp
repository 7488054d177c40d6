// Ranks placed on hosts from a count or a hostfile (host_placement.hpp).
#include "host_placement.hpp"

#include <algorithm>
#include <optional>
#include <sstream>

#include "rank_layout.hpp"
#include "read_file.hpp"

namespace pipevm::config {

namespace {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// Open MPI's hostfile: `name [slots=N] ...` per line, `#` comments; a host
// without slots= takes one.
bool parse_hostfile(const std::string& text, std::vector<HostSlots>& hosts, std::string& error) {
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    HostSlots host;
    if (!(words >> host.name)) continue;
    std::string word;
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0) continue;
      try {
        host.slots = std::stoi(word.substr(6));
      } catch (const std::exception&) {
        host.slots = 0;
      }
      if (host.slots < 1) {
        error = "line " + std::to_string(number) + ": slots must be a positive number";
        return false;
      }
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) error = "no hosts in it";
  return !hosts.empty();
}

}  // namespace

bool place_on_hosts(const HostRequest& request, const Config& config, HostPlacement& placement,
                    std::string& error) {
  const int ranks = config.ranks();
  std::vector<HostSlots> hosts;
  if (!request.hostfile.empty()) {
    std::string text;
    if (!read_input_file(request.hostfile, kMaxYamlBytes, "hostfiles", text, error) ||
        !parse_hostfile(text, hosts, error)) {
      error = "hostfile '" + request.hostfile + "': " + error;
      return false;
    }
  } else if (request.hosts > 0) {
    const int per_host = (ranks + request.hosts - 1) / request.hosts;
    for (int h = 0; h < request.hosts; ++h) {
      hosts.push_back({"h" + std::to_string(h + 1), per_host});
    }
  } else {
    return true;
  }
  std::vector<std::string> host_of_mpi_rank;
  for (const HostSlots& host : hosts) {
    for (int slot = 0; slot < host.slots && static_cast<int>(host_of_mpi_rank.size()) < ranks;
         ++slot) {
      host_of_mpi_rank.push_back(host.name);
    }
  }
  if (static_cast<int>(host_of_mpi_rank.size()) < ranks) {
    error = "the hosts have " + std::to_string(host_of_mpi_rank.size()) + " slots for " +
            std::to_string(ranks) + " ranks (stages x dp)";
    return false;
  }
  const std::optional<RankLayout> layout = rank_layout_from_name(request.layout);
  if (!layout) {
    error = "unknown layout '" + request.layout + "' (expected mpi, pp-inner or dp-inner)";
    return false;
  }
  const std::vector<int> program_rank = program_ranks(host_of_mpi_rank, *layout, config.stages);
  std::vector<std::string> host_of_rank(static_cast<std::size_t>(ranks));
  std::vector<int> mpi_rank_of(static_cast<std::size_t>(ranks));
  for (int mpi = 0; mpi < ranks; ++mpi) {
    const auto rank = static_cast<std::size_t>(program_rank[static_cast<std::size_t>(mpi)]);
    host_of_rank[rank] = host_of_mpi_rank[static_cast<std::size_t>(mpi)];
    mpi_rank_of[rank] = mpi;
  }
  for (const std::string& host : host_of_rank) {
    auto found = std::find(placement.names.begin(), placement.names.end(), host);
    if (found == placement.names.end()) found = placement.names.insert(found, host);
    placement.host_of_rank.push_back(static_cast<int>(found - placement.names.begin()));
  }
  placement.lines = describe_placement(host_of_rank, mpi_rank_of, *layout, config.stages);
  return true;
}

}  // namespace pipevm::config
