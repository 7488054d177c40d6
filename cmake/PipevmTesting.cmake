# Helpers for the test folders.
#
# pipevm_add_gtest(NAME target [FAMILY family] SOURCES a.cpp ... [LIBS ...]
#                  [LABELS ...] [FIXTURES ...] [ENVIRONMENT VAR=value ...] [OWN_MAIN])
#   one GoogleTest executable; every TEST(suite, name) becomes its own CTest
#   test named family.suite.name (`ctest -R '^family\.'` selects the
#   executable's tests, `-R '^family\.suite\.'` one suite). Without FAMILY
#   the suites carry it (suites registered with dots in their names).
#   OWN_MAIN: the sources define main() (not gtest_main). FIXTURES: the
#   CTest fixtures (FIXTURES_SETUP of other tests) its tests need.
#   ENVIRONMENT: variables its tests run with (over the test preset's).
# pipevm_add_mpi_test(NAME ctest-name NP n COMMAND exe args...)
#   runs `mpiexec -n NP --oversubscribe --allow-run-as-root exe args...`
#   with label `mpi` and PROCESSORS NP.
# pipevm_assert_not_linked(target forbidden)
#   stops the configuration when `target` links `forbidden`, directly or
#   through any library it links (e.g. the checker's tests and MPI).
include(GoogleTest)
find_package(GTest REQUIRED)

function(pipevm_add_gtest)
  cmake_parse_arguments(T "OWN_MAIN" "NAME;FAMILY" "SOURCES;LIBS;LABELS;FIXTURES;ENVIRONMENT" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest pipevm::warnings)
  if(NOT T_OWN_MAIN)
    target_link_libraries(${T_NAME} PRIVATE GTest::gtest_main)
  endif()
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  target_compile_definitions(${T_NAME} PRIVATE
    PIPEVM_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PIPEVM_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(properties TIMEOUT 120)
  if(T_LABELS)
    list(APPEND properties LABELS "${T_LABELS}")
  endif()
  if(T_FIXTURES)
    list(APPEND properties FIXTURES_REQUIRED "${T_FIXTURES}")
  endif()
  if(T_ENVIRONMENT)
    list(APPEND properties ENVIRONMENT "${T_ENVIRONMENT}")
  endif()
  set(prefix "")
  if(T_FAMILY)
    set(prefix "${T_FAMILY}.")
  endif()
  gtest_discover_tests(${T_NAME} TEST_PREFIX "${prefix}" PROPERTIES ${properties}
                       DISCOVERY_TIMEOUT 30)
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

# Every target `target` links, directly or through the libraries it links
# (PRIVATE dependencies of static libraries included), into `out`.
function(pipevm_link_closure target out)
  set(seen "")
  set(todo "${target}")
  while(TRUE)
    list(LENGTH todo left)
    if(left EQUAL 0)
      break()
    endif()
    list(POP_FRONT todo current)
    if(current IN_LIST seen OR NOT TARGET "${current}")
      continue()
    endif()
    list(APPEND seen "${current}")
    get_target_property(aliased "${current}" ALIASED_TARGET)
    if(aliased)
      list(APPEND todo "${aliased}")
      continue()
    endif()
    get_target_property(type "${current}" TYPE)
    set(properties INTERFACE_LINK_LIBRARIES)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      list(APPEND properties LINK_LIBRARIES)
    endif()
    foreach(property ${properties})
      get_target_property(libraries "${current}" ${property})
      if(NOT libraries)
        continue()
      endif()
      foreach(library ${libraries})
        string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" library "${library}")
        list(APPEND todo "${library}")
      endforeach()
    endforeach()
  endwhile()
  set(${out} "${seen}" PARENT_SCOPE)
endfunction()

function(pipevm_assert_not_linked target forbidden)
  pipevm_link_closure(${target} closure)
  if(forbidden IN_LIST closure)
    message(FATAL_ERROR "${target} must not link ${forbidden}, but its libraries bring it in")
  endif()
endfunction()

# The environment a test needs to load the Python module into Debian's
# python3, which is not built with the sanitizers: under the sanitizer
# preset the module is instrumented, so the sanitizers' runtimes must be
# loaded first (LD_PRELOAD; without it, import crashes), and the
# interpreter's own allocations still held at exit are not the module's
# leaks (detect_leaks=0; the executables' tests keep leak checking).
# Empty in other builds.
set(PIPEVM_PYTHON_SANITIZER_ENVIRONMENT "")
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*address")
  set(runtimes "")
  foreach(runtime libasan.so libubsan.so)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${runtime}
                    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE)
    list(APPEND runtimes ${path})
  endforeach()
  list(JOIN runtimes ":" preload)
  set(PIPEVM_PYTHON_SANITIZER_ENVIRONMENT "LD_PRELOAD=${preload}" "ASAN_OPTIONS=detect_leaks=0")
endif()
