# PIPEVM_CHECK_AVX512 (.ci/run turns it on): compile every translation
# unit that includes Eigen a second time, for -march=x86-64-v4, with the same
# flags and warnings as its own target — as object files only, never linked
# or run — so that a warning in Eigen's AVX-512 code path fails CI on a
# machine without AVX-512 too (issue 9: GCC 12 reported 138 errors in
# avx512fintrin.h from runtime/layers.cpp with -march=native on AVX-512,
# while CI ran on AVX2). About 10 files; each target T gets an object
# library T_avx512 of wrappers that #include its Eigen files, and the wrapper
# sources carry -march=x86-64-v4, which comes after the target's own -march
# on the command line and so wins.
#
# Which files include Eigen is read from the sources at configure time: a
# file that includes <Eigen/...> or a header that does (by file name,
# transitively).
option(PIPEVM_CHECK_AVX512
       "Also compile every file that includes Eigen for x86-64-v4 (AVX-512), as CI does" OFF)
# The copies link what their originals link (GTest, Google Benchmark): the
# packages' targets must be visible from the top directory, where they are made.
if(PIPEVM_CHECK_AVX512)
  set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)
endif()

# The names of the project's files that include Eigen, directly or not.
function(_pipevm_eigen_includers out)
  file(GLOB_RECURSE files LIST_DIRECTORIES false
       ${PROJECT_SOURCE_DIR}/runtime/* ${PROJECT_SOURCE_DIR}/interpreter/*
       ${PROJECT_SOURCE_DIR}/train/* ${PROJECT_SOURCE_DIR}/dsl/* ${PROJECT_SOURCE_DIR}/cli/*
       ${PROJECT_SOURCE_DIR}/tests/* ${PROJECT_SOURCE_DIR}/bench/* ${PROJECT_SOURCE_DIR}/core/*)
  list(FILTER files INCLUDE REGEX "\\.(hpp|h|cpp)$")
  set(includers "")
  foreach(f IN LISTS files)
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    set(names "")
    foreach(line IN LISTS lines)
      if(line MATCHES "<Eigen/")
        list(APPEND includers ${f})
      elseif(line MATCHES "\"([^\"]+)\"")
        get_filename_component(name ${CMAKE_MATCH_1} NAME)
        list(APPEND names ${name})
      endif()
    endforeach()
    string(MAKE_C_IDENTIFIER "${f}" key)
    set(includes_${key} ${names})
  endforeach()
  # Grow the set until no file includes a header of it that it does not hold.
  set(grown TRUE)
  while(grown)
    set(grown FALSE)
    set(header_names "")
    foreach(f IN LISTS includers)
      get_filename_component(name ${f} NAME)
      list(APPEND header_names ${name})
    endforeach()
    foreach(f IN LISTS files)
      if(f IN_LIST includers)
        continue()
      endif()
      string(MAKE_C_IDENTIFIER "${f}" key)
      foreach(name IN LISTS includes_${key})
        if(name IN_LIST header_names)
          list(APPEND includers ${f})
          set(grown TRUE)
          break()
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(${out} ${includers} PARENT_SCOPE)
endfunction()

# Every target defined in `dir` and below.
function(_pipevm_targets_in dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _pipevm_targets_in(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Call once, after every target is defined.
function(pipevm_add_avx512_check)
  if(NOT PIPEVM_CHECK_AVX512)
    return()
  endif()
  check_cxx_compiler_flag(-march=x86-64-v4 PIPEVM_MARCH_X86_64_V4_WORKS)
  if(NOT PIPEVM_MARCH_X86_64_V4_WORKS)
    message(FATAL_ERROR "PIPEVM_CHECK_AVX512 needs a compiler that accepts -march=x86-64-v4 "
                        "(GCC 11, clang 12 or later)")
  endif()
  _pipevm_eigen_includers(eigen_files)
  _pipevm_targets_in(${PROJECT_SOURCE_DIR} targets)
  set(checks "")
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(wrappers "")
    foreach(source IN LISTS sources)
      get_filename_component(path ${source} ABSOLUTE BASE_DIR ${source_dir})
      if(NOT path MATCHES "\\.cpp$" OR NOT path IN_LIST eigen_files)
        continue()
      endif()
      get_filename_component(name ${path} NAME)
      set(wrapper ${PROJECT_BINARY_DIR}/avx512-check/${target}/${name})
      file(CONFIGURE OUTPUT ${wrapper}
           CONTENT "// ${path} compiled for x86-64-v4 (cmake/Avx512Check.cmake)\n#include \"${path}\"\n")
      list(APPEND wrappers ${wrapper})
    endforeach()
    if(NOT wrappers)
      continue()
    endif()
    set(check ${target}_avx512)
    add_library(${check} OBJECT ${wrappers})
    foreach(property COMPILE_DEFINITIONS COMPILE_OPTIONS INCLUDE_DIRECTORIES LINK_LIBRARIES)
      get_target_property(values ${target} ${property})
      if(values)
        set_property(TARGET ${check} PROPERTY ${property} ${values})
      endif()
    endforeach()
    set_source_files_properties(${wrappers} TARGET_DIRECTORY ${check}
                                PROPERTIES COMPILE_OPTIONS -march=x86-64-v4)
    list(APPEND checks ${check})
  endforeach()
  # Built by default, and alone with: cmake --build build/release --target avx512_check
  add_custom_target(avx512_check)
  add_dependencies(avx512_check ${checks})
  list(LENGTH checks count)
  message(STATUS "pipevm: Eigen's AVX-512 path compiled as well (${count} targets)")
endfunction()
