// Durable writes and the writability checks of output paths: a missing
// directory, a directory where a file should go, a place even root cannot
// write (/sys), a FIFO, and the paths that are fine.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "output_files.hpp"

namespace pipevm::runtime {
namespace {

namespace fs = std::filesystem;

// A fresh directory of this test, removed at the end.
class TemporaryDirectory {
 public:
  explicit TemporaryDirectory(const std::string& name)
      : path_(fs::temp_directory_path() / ("pipevm-" + std::to_string(getpid()) + "-" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TemporaryDirectory() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

std::size_t entries(const std::string& directory) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(directory)) ++count;
  return count;
}

TEST(output_files, durable_write_replaces_the_file_and_leaves_nothing_else) {
  const TemporaryDirectory dir("durable");
  const std::string path = dir / "out.bin";
  const std::string first = "first contents";
  const std::string second = "second";
  write_file_durably(path, std::as_bytes(std::span<const char>(first)));
  write_file_durably(path, std::as_bytes(std::span<const char>(second)));
  EXPECT_EQ(read_whole_file(path), second);
  EXPECT_EQ(entries(dir.path()), 1u) << "a temporary file was left behind";
}

TEST(output_files, durable_write_into_a_missing_directory_names_path_and_reason) {
  const TemporaryDirectory dir("durable-missing");
  const std::string path = dir / "no-such-directory/out.bin";
  try {
    write_file_durably(path, {});
    FAIL() << "the write succeeded";
  } catch (const FileError& error) {
    EXPECT_NE(std::string(error.what()).find("no-such-directory/out.bin.tmp"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("No such file or directory"), std::string::npos)
        << error.what();
  }
}

TEST(output_files, reading_a_missing_file_names_it) {
  EXPECT_THROW(read_whole_file("/nonexistent-pipevm/file"), FileError);
}

TEST(output_files, writable_file_paths_pass_the_check) {
  const TemporaryDirectory dir("writable");
  EXPECT_EQ(why_not_writable_file(dir / "new.safetensors"), std::nullopt);
  std::ofstream(dir / "existing.json") << "kept";
  EXPECT_EQ(why_not_writable_file(dir / "existing.json"), std::nullopt);
  EXPECT_EQ(read_whole_file(dir / "existing.json"), "kept") << "the check changed the file";
  EXPECT_EQ(entries(dir.path()), 1u) << "the probe file was left behind";
}

TEST(output_files, unwritable_file_paths_are_refused_with_the_reason) {
  const TemporaryDirectory dir("unwritable");
  const auto reason = [](const std::string& path) {
    return why_not_writable_file(path).value_or("(accepted)");
  };
  EXPECT_EQ(reason(dir / "missing/x.safetensors"),
            "cannot create a file in " + (dir / "missing") + ": No such file or directory");
  EXPECT_EQ(reason(dir.path()), "Is a directory");
  std::ofstream(dir / "plain") << "x";
  EXPECT_EQ(reason(dir / "plain/x.safetensors"), "Not a directory");
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(reason(dir / "fifo"), "not a regular file");
  EXPECT_EQ(reason(""), "the path is empty");
  // sysfs takes no new files, not even from root (permission bits do not
  // stop root: only a real attempt tells).
  EXPECT_NE(reason("/sys/pipevm-test.safetensors").find("cannot create a file in /sys: "),
            std::string::npos);
}

TEST(output_files, output_directories_are_created_or_refused) {
  const TemporaryDirectory dir("directories");
  EXPECT_EQ(why_not_writable_directory(dir / "a/b"), std::nullopt);
  EXPECT_TRUE(fs::is_directory(dir / "a/b"));
  EXPECT_EQ(entries(dir / "a/b"), 0u) << "the probe file was left behind";
  std::ofstream(dir / "file") << "x";
  EXPECT_EQ(why_not_writable_directory(dir / "file").value_or("(accepted)"), "Not a directory");
  EXPECT_NE(why_not_writable_directory("/sys/pipevm-test").value_or("(accepted)"), "(accepted)");
}

}  // namespace
}  // namespace pipevm::runtime
