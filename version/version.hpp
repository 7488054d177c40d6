// What was built from what: the project's version and the commit of the
// checkout it was built from. The definitions are generated into the build
// tree at build time (write_version.cmake), so that a new commit recompiles
// this one file and relinks what links it, nothing else. Leaves out any
// build date: two builds of one commit print the same.
#pragma once

#include <string_view>

namespace pipevm {

// The version of project() in CMakeLists.txt, e.g. "0.1.0".
std::string_view project_version();

// `git describe --always --dirty` of the source tree when the build ran
// ("04e1713", "v0.1.0-3-g04e1713-dirty"), or "unknown" when the sources are
// not a git checkout of their own (a release tarball) or git is missing.
std::string_view source_commit();

}  // namespace pipevm
