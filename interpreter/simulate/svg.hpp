// Timelines as SVG pictures, like the figures of the GPipe and Zero Bubble
// papers: one row per rank, a coloured block per instruction's work labelled
// with its micro-batch, communication as thin grey bars, a time axis and a
// legend. Self-contained (no fonts or scripts beyond the viewer's sans-serif).
#pragma once

#include <iosfwd>
#include <string>

#include "program.hpp"
#include "simulate.hpp"

namespace pipevm {

// `title` goes above the rows (e.g. "1f1b: 4 stages, 8 micro-batches").
void write_svg(std::ostream& out, const Program& program, const Timeline& timeline,
               const std::string& title);
// False (with `error` set) when the file cannot be written.
bool write_svg(const std::string& path, const Program& program, const Timeline& timeline,
               const std::string& title, std::string& error);

}  // namespace pipevm
