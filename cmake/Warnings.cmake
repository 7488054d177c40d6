# Warning flags as an INTERFACE target every pipevm target links.
add_library(pipevm_warnings INTERFACE)
add_library(pipevm::warnings ALIAS pipevm_warnings)
target_compile_options(pipevm_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion
  -Wnull-dereference -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(PIPEVM_WARNINGS_AS_ERRORS)
  target_compile_options(pipevm_warnings INTERFACE -Werror)
endif()
