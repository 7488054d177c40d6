# pipevm_add_library(NAME SOURCES a.cpp ... [PUBLIC lib ...] [PRIVATE lib ...])
#   One room's static library: the target pipevm_NAME and its alias
#   pipevm::NAME, its folder as its public include path (a folder holds one
#   target, so an include names a header of a room it links), the project's
#   warnings, and the libraries it links: PUBLIC those its headers expose,
#   PRIVATE those only its sources use.
# Leaves out what only some rooms need (position-independent code for the
# Python module, -march for Eigen): their folders add it.
function(pipevm_add_library name)
  cmake_parse_arguments(L "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  if(NOT L_SOURCES)
    message(FATAL_ERROR "pipevm_add_library(${name}): no SOURCES")
  endif()
  add_library(pipevm_${name} STATIC ${L_SOURCES})
  add_library(pipevm::${name} ALIAS pipevm_${name})
  target_include_directories(pipevm_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(pipevm_${name} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE} pipevm::warnings)
endfunction()
