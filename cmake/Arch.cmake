# The instruction set the numerics are compiled for: an INTERFACE target,
# pipevm::arch, that pipevm::runtime passes on (PUBLIC) to everything that
# includes Eigen, because every translation unit that includes Eigen must
# agree on its vector width and alignment.
#
# PIPEVM_ARCH is the value of -march: `native` (default) for the build
# machine's CPU, or a baseline every node of a cluster has, such as
# x86-64-v3 (AVX2, FMA), x86-64-v2 (SSE4.2) or x86-64; empty for no -march at
# all (the compiler's default, x86-64 on Debian). A native binary stops with
# SIGILL on an older CPU; bench/RESULTS.md has what a baseline costs.
include(CheckCXXCompilerFlag)

set(PIPEVM_ARCH "native" CACHE STRING
    "-march for the numerics: native, x86-64-v3, x86-64-v2, x86-64, or empty for none")
# PIPEVM_NATIVE=OFF (the option before PIPEVM_ARCH) still means no -march.
if(DEFINED PIPEVM_NATIVE AND NOT PIPEVM_NATIVE)
  message(DEPRECATION "PIPEVM_NATIVE=OFF: use -DPIPEVM_ARCH= (empty) instead")
  set(PIPEVM_ARCH "")
endif()

add_library(pipevm_arch INTERFACE)
add_library(pipevm::arch ALIAS pipevm_arch)
if(NOT PIPEVM_ARCH STREQUAL "")
  string(MAKE_C_IDENTIFIER "PIPEVM_MARCH_${PIPEVM_ARCH}_WORKS" arch_works)
  check_cxx_compiler_flag("-march=${PIPEVM_ARCH}" ${arch_works})
  if(NOT ${arch_works})
    message(FATAL_ERROR "${CMAKE_CXX_COMPILER} does not accept -march=${PIPEVM_ARCH} "
                        "(PIPEVM_ARCH): try native, x86-64-v3, x86-64-v2 or x86-64")
  endif()
  target_compile_options(pipevm_arch INTERFACE -march=${PIPEVM_ARCH})
  message(STATUS "pipevm: numerics compiled with -march=${PIPEVM_ARCH}")
else()
  message(STATUS "pipevm: numerics compiled for the compiler's default architecture")
endif()
