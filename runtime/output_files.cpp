// Durable writes and writability checks over POSIX calls (see
// output_files.hpp): std::ofstream can neither fsync nor say why it failed.
#include "output_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "file_descriptor.hpp"

namespace pipevm::runtime {
namespace {

std::string reason(int error) {
  return std::strerror(error);
}

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw FileError("cannot " + what + " " + path + ": " + reason(error));
}

std::string directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void write_all(int fd, std::span<const std::byte> bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("write", path, errno);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(written));
  }
}

// A name no other process, here or on another host sharing the directory, uses.
std::string probe_name(const std::string& directory) {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "host");
  return directory + "/.pipevm-probe." + host + "." + std::to_string(::getpid());
}

std::optional<std::string> why_no_new_file(const std::string& directory) {
  const std::string probe = probe_name(directory);
  FileDescriptor fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return "cannot create a file in " + directory + ": " + reason(errno);
  fd.close();
  ::unlink(probe.c_str());
  return std::nullopt;
}

}  // namespace

void sync_directory(const std::string& directory) {
  FileDescriptor fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) fail("open the directory", directory, errno);
  if (::fsync(fd.get()) != 0) fail("sync the directory", directory, errno);
}

void write_file_durably(const std::string& path, std::span<const std::byte> bytes) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  try {
    FileDescriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) fail("create", temporary, errno);
    write_all(fd.get(), bytes, temporary);
    if (::fsync(fd.get()) != 0) fail("sync", temporary, errno);
    if (const int error = fd.close(); error != 0) fail("close", temporary, error);
    if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("rename into", path, errno);
  } catch (const FileError&) {
    ::unlink(temporary.c_str());
    throw;
  }
  sync_directory(directory_of(path));
}

std::string read_whole_file(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) fail("open", path, errno);
  struct stat status = {};
  if (::fstat(fd.get(), &status) != 0) fail("stat", path, errno);
  if (!S_ISREG(status.st_mode)) throw FileError(path + " is not a regular file");
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      fail("read", path, errno);
    }
    if (got == 0) return bytes;
    bytes.append(buffer, static_cast<std::size_t>(got));
  }
}

std::optional<std::string> why_not_writable_file(const std::string& path) {
  if (path.empty()) return std::string("the path is empty");
  struct stat status = {};
  if (::stat(path.c_str(), &status) == 0) {
    if (S_ISDIR(status.st_mode)) return reason(EISDIR);
    if (!S_ISREG(status.st_mode)) return std::string("not a regular file");
    FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
    if (!fd.valid()) return "cannot open it for writing: " + reason(errno);
  } else if (errno != ENOENT) {
    return reason(errno);
  }
  return why_no_new_file(directory_of(path));
}

std::optional<std::string> why_not_writable_directory(const std::string& directory) {
  if (directory.empty()) return std::string("the path is empty");
  struct stat status = {};
  if (::stat(directory.c_str(), &status) == 0) {
    if (!S_ISDIR(status.st_mode)) return reason(ENOTDIR);
  } else if (errno != ENOENT) {
    return reason(errno);
  } else {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) return "cannot create it: " + error.message();
  }
  return why_no_new_file(directory);
}

}  // namespace pipevm::runtime
