// A test registered at run time under any suite name, for tests made from
// data (one per golden file, one per configuration): with dots in the
// suite, the ctest name is exactly `suite.name` (dsl.golden.NAME,
// vm.equivalence.CASE). Call it before RUN_ALL_TESTS, e.g. from a
// namespace-scope initializer.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace pipevm::test_support {

class FunctionTest : public testing::Test {
 public:
  explicit FunctionTest(std::function<void()> body) : body_(std::move(body)) {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

inline void register_test(const std::string& suite, const std::string& name,
                          std::function<void()> body) {
  testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                        [body]() -> testing::Test* { return new FunctionTest(body); });
}

}  // namespace pipevm::test_support
