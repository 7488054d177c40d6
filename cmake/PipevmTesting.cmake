# Helpers for the test folders.
#
# pipevm_add_gtest(NAME target SOURCES a.cpp ... [LIBS ...] [LABELS ...])
#   one GoogleTest executable; every TEST becomes its own CTest test, named
#   by the test's dotted name (see gtest_discover_tests' TEST_PREFIX).
# pipevm_add_mpi_test(NAME ctest-name NP n COMMAND exe args...)
#   runs `mpiexec -n NP --oversubscribe --allow-run-as-root exe args...`
#   with label `mpi` and PROCESSORS NP.
include(GoogleTest)
find_package(GTest REQUIRED)

function(pipevm_add_gtest)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main
                        pipevm::warnings)
  target_compile_definitions(${T_NAME} PRIVATE
    PIPEVM_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PIPEVM_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(properties TIMEOUT 120)
  if(T_LABELS)
    list(APPEND properties LABELS "${T_LABELS}")
  endif()
  gtest_discover_tests(${T_NAME} PROPERTIES ${properties} DISCOVERY_TIMEOUT 30)
endfunction()

function(pipevm_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} --oversubscribe
                   --allow-run-as-root ${MPIEXEC_PREFLAGS} ${T_COMMAND} ${MPIEXEC_POSTFLAGS})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "mpi;${T_LABELS}" PROCESSORS ${T_NP}
                       TIMEOUT ${T_TIMEOUT})
endfunction()
