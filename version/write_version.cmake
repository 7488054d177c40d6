# Run at every build (cmake -P): writes version.cpp with the commit of the
# source tree. configure_file leaves the output untouched when its text is
# unchanged, so an unchanged commit recompiles nothing.
#   -DGIT_EXECUTABLE=  git, or empty when configure found none
#   -DSOURCE_DIR=      the project's source tree
#   -DPIPEVM_VERSION=  the project's version
#   -DTEMPLATE= -DOUTPUT=  version.cpp.in and the file to write
set(PIPEVM_COMMIT unknown)
if(GIT_EXECUTABLE)
  # Only a checkout of its own: sources unpacked inside another repository
  # (a tarball in someone's dotfiles) must not take that repository's commit.
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} rev-parse --show-toplevel
                  OUTPUT_VARIABLE top_level RESULT_VARIABLE status
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(status EQUAL 0)
    file(REAL_PATH "${top_level}" top_level)
    file(REAL_PATH "${SOURCE_DIR}" source_dir)
  endif()
  if(status EQUAL 0 AND top_level STREQUAL source_dir)
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} describe --always --dirty
                    OUTPUT_VARIABLE described RESULT_VARIABLE status
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(status EQUAL 0 AND described MATCHES "^[0-9A-Za-z._+-]+$")
      set(PIPEVM_COMMIT "${described}")
    endif()
  endif()
endif()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
