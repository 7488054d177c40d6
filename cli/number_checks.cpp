// Numeric range checks with errors in words (number_checks.hpp).
#include "number_checks.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace pipevm::cli {

namespace {

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", value);
  return text;
}

// The check: empty when `text` is a number within [least, most] (above
// `least` when `strict`).
CLI::Validator range_check(double least, double most, bool strict, const std::string& words,
                           const std::string& description) {
  return CLI::Validator(
      [least, most, strict, words](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || std::isnan(value)) {
          return "expected a number, got '" + text + "'";
        }
        if (value < least || value > most || (strict && value == least))
          return "must be " + words + ", got " + text;
        return "";
      },
      description);
}

}  // namespace

CLI::Validator at_least(double least) {
  return range_check(least, HUGE_VAL, false, "≥ " + number_text(least), "≥ " + number_text(least));
}

CLI::Validator above(double bound) {
  return range_check(bound, HUGE_VAL, true, "> " + number_text(bound), "> " + number_text(bound));
}

CLI::Validator in_range(double least, double most) {
  const std::string words = "from " + number_text(least) + " to " + number_text(most);
  return range_check(least, most, false, words, number_text(least) + ".." + number_text(most));
}

}  // namespace pipevm::cli
