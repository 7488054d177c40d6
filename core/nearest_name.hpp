// The "did you mean" rule shared by every front door: the candidate closest to
// a misspelt word by edit distance (case-insensitive), when it is close
// enough to be a likely typo. It leaves the wording of the hint to the caller.
#pragma once

#include <string_view>
#include <vector>

namespace pipevm {

// Edit distance (insertions, deletions, substitutions), letters compared
// case-insensitively.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest `word`, or empty when none is within
// max(2, |word| / 3) edits.
std::string_view nearest_name(std::string_view word,
                              const std::vector<std::string_view>& candidates);

}  // namespace pipevm
