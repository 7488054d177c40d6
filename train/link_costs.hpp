// `pipevm run --profile`'s message costs: the start-up ping-pong between
// neighbouring stages (runtime/link_probe.hpp) at two sizes, 8 bytes and the
// run's largest activation, gathered to world rank 0 and fitted per link
// class (ranks of one host, ranks on different hosts) into the cost keys
// send and bandwidth (cross-host-send, cross-host-bandwidth); and each
// rank's copies to host memory (runtime/host_copies.hpp) at two sizes,
// fitted into host-latency and host-bandwidth.
// Not here: writing the cost file (trace_recorder.hpp).
#pragma once

#include <string>
#include <vector>

#include "comm.hpp"
#include "cost_fit.hpp"
#include "model_shape.hpp"

namespace pipevm::train {

// World-wide (every rank calls it). `hosts` holds each program rank's host,
// `widths` the model's layer widths, `split` its pieces and `rows` a
// micro-batch's rows. Meaningful on world rank 0; a class without a pair
// stays unset (one stage: nothing to measure).
MeasuredLinks measure_links(runtime::Comm& comm, const std::vector<std::string>& hosts,
                            const std::vector<int>& widths, const std::vector<LayerRange>& split,
                            int rows);

}  // namespace pipevm::train
