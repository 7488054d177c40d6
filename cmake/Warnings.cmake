# Warning flags as an INTERFACE target every pipevm target links.
add_library(pipevm_warnings INTERFACE)
add_library(pipevm::warnings ALIAS pipevm_warnings)
target_compile_options(pipevm_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion
  -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
# GCC 12 reports -Wrestrict on ordinary std::string concatenation at -O2
# (GCC bug 105651, fixed in 13); it is noise there, not a finding. For the
# same reason -Wnull-dereference is not in the list: at -O2 it fires inside
# libstdc++'s streambuf; UBSan (the asan preset) catches real null uses.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(pipevm_warnings INTERFACE -Wno-restrict)
endif()
if(PIPEVM_WARNINGS_AS_ERRORS)
  target_compile_options(pipevm_warnings INTERFACE -Werror)
endif()
