# What `cmake --install` puts where (GNU layout under the prefix), and the
# Debian package CPack builds from the same rules (`cpack -G DEB` in the
# build directory, or the target `package`); docs/installing.md lists the
# layout. Leaves out the libraries and headers: pipevm installs as a tool,
# not as a C++ library.
#
# Included last, after every target. The Python module (python/, target
# pipevm_python) installs itself, where Debian's python3 looks under the prefix; the package
# takes it in and depends on its Python.
include(GNUInstallDirs)
# Installing and packaging take what the build made: neither builds the
# whole tree again first (`cmake --install` never does; with this, cpack
# neither), so the install tests run in seconds after `cmake --build`.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

# The installed executable keeps the run path to OpenBLAS's sequential build
# (runtime/CMakeLists.txt): without it the loader takes the libopenblas.so.0
# alternative, on most machines the threaded build, a thread pool per rank.
get_filename_component(pipevm_openblas_serial_dir "${PIPEVM_OPENBLAS_SERIAL}" DIRECTORY)
set_target_properties(pipevm PROPERTIES INSTALL_RPATH "${pipevm_openblas_serial_dir}")
install(TARGETS pipevm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/schedules ${PROJECT_SOURCE_DIR}/examples
        DESTINATION ${CMAKE_INSTALL_DATADIR}/pipevm)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        PATTERN pipevm.1 EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/docs/pipevm.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/editors/bash-completion/pipevm
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# The .deb: its Depends are the Debian packages of the shared libraries the
# executable links (dpkg-shlibdeps, from dpkg-dev), plus Open MPI's launcher,
# which nothing links but every run needs, and OpenBLAS's sequential build
# by name (Debian's shlibs name only libopenblas0, which the threaded build
# satisfies).
set(CPACK_PACKAGE_NAME pipevm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "pipevm maintainers <maintainers@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "pipeline-parallel training schedules as checked programs")
set(CPACK_PACKAGE_DESCRIPTION
    "pipevm reads a pipeline-parallel training schedule written as a short text program,\n\
proves it free of deadlock, simulates its timeline and memory, and runs it with a\n\
small virtual machine on MPI ranks training a real model.")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE ${PIPEVM_REPOSITORY_URL})
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin, libopenblas0-serial")
# The module is built for one minor version of Python (its ABI tag names it).
if(TARGET pipevm_python)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  math(EXPR next_minor "${Python3_VERSION_MINOR} + 1")
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", python3 (>= 3.${Python3_VERSION_MINOR}~),"
         " python3 (<< 3.${next_minor})")
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "dataset-fashion-mnist, bash-completion")
# `package_source`: the sources as a tarball, without builds or the repository
# (its pipevm --version then names the commit "unknown").
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/\\\\.git$" "/build/" "/\\\\.cache/")
include(CPack)
