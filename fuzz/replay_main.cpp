// The main() of a fuzz target outside libFuzzer: runs
// LLVMFuzzerTestOneInput on every file named on the command line, and on
// every file of every directory named (in name order), the way libFuzzer
// runs a corpus once. This is how the checked-in corpora and the crash
// reproducers (fuzz/regressions/TARGET/) run under ctest in every build,
// asan included. A violated property aborts; the file being run is printed
// first so that the failure names it. Leaves out: mutation, coverage.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputs_of(const std::filesystem::path& argument) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(argument)) {
    for (const auto& entry : std::filesystem::directory_iterator(argument)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(argument);
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::filesystem::exists(argv[i])) {
      std::fprintf(stderr, "no such file or directory: %s\n", argv[i]);
      return 2;
    }
    for (const std::filesystem::path& file : inputs_of(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      std::fprintf(stderr, "running %s (%zu bytes)\n", file.c_str(), bytes.size());
      // An exact-size heap copy, as libFuzzer passes it: ASan sees a read past its end.
      const std::vector<std::uint8_t> copy(bytes.begin(), bytes.end());
      LLVMFuzzerTestOneInput(copy.data(), copy.size());
      ++runs;
    }
  }
  if (runs == 0) {
    std::fprintf(stderr, "no inputs\n");
    return 2;
  }
  std::printf("%zu inputs ran, every property held\n", runs);
  return 0;
}
