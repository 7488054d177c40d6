// A POSIX file descriptor closed on every path out of a scope (read_file.cpp
// reads through one, runtime/output_files.cpp writes through one). close()
// closes early and reports its errno where a failed close matters (a write
// that must reach the disk). Not here: opening, reading, writing.
#pragma once

#include <unistd.h>

#include <cerrno>

namespace pipevm {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now; the errno of a failed close, else 0.
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

}  // namespace pipevm
