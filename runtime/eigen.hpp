// Eigen, as every pipevm file includes it: through this header only, so that
// the one workaround below covers every translation unit.
//
// GCC 12 reports a false positive inside its AVX-512 intrinsics once Eigen's
// AVX-512 kernels are inlined (GCC bug 105593; intrinsics.hpp has the whole
// story): -march=native on any AVX-512 machine then fails the build with
// warnings as errors. The intrinsics are included first through
// intrinsics.hpp, which silences the warning for their lines, and Eigen's
// own headers here under the same silence, only for GCC 12: pipevm's own
// code keeps both warnings. The CI build compiles every file that includes
// Eigen for x86-64-v4 as well (PIPEVM_CHECK_AVX512,
// cmake/Avx512Check.cmake), so that this cannot come back unseen on a
// machine without AVX-512.
#pragma once

#include "intrinsics.hpp"

PIPEVM_BEGIN_INTRINSICS_HEADERS
#include <Eigen/Core>
PIPEVM_END_INTRINSICS_HEADERS
