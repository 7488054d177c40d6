// Reading a file a user names on the command line (a schedule, a YAML
// configuration or cost file) in one piece: regular files only — a
// directory, a FIFO, a device or a socket is refused without reading from
// it, so a FIFO nobody writes to cannot block — and no more than a size
// limit, so that a wrong path cannot fill the memory. What the text means
// is the caller's business.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pipevm {

inline constexpr std::uint64_t kMiB = 1024 * 1024;
// Schedules: about 17 million instructions written out flat (`pipevm expand`
// writes ~15 bytes per instruction); source offsets are 32-bit in any case.
inline constexpr std::uint64_t kMaxScheduleBytes = 256 * kMiB;
// YAML configuration and cost files are a few dozen lines.
inline constexpr std::uint64_t kMaxYamlBytes = 1 * kMiB;

// The whole file in `text`; false with `error` set to the reason without the
// path ("is a directory", "is a FIFO (named pipe), not a regular file",
// "is 300 MiB, over the 256 MiB limit for schedules", strerror's). `kind`
// names the files the limit is for ("schedules").
bool read_input_file(const std::string& path, std::uint64_t max_bytes, std::string_view kind,
                     std::string& text, std::string& error);

}  // namespace pipevm
