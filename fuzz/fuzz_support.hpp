// What every fuzz target shares: FUZZ_ASSERT, which states a property the
// target checks on each input and, when it fails, names the property and
// aborts (libFuzzer then saves the input as a crash; under ctest the replay
// fails). The same target source is built twice: with libFuzzer (preset
// `fuzz`) and with replay_main.cpp into an ordinary test that runs the
// checked-in corpus and regressions. Leaves out: input generation (the
// targets read raw bytes as the user's file would be).
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_ASSERT(condition, what)                                                         \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n", __FILE__, __LINE__, what); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)
