// Work that runs beside the step's ops: on CUDA, ops enqueued through run() go to the
// context's side stream, forked from the step stream at construction and joined back by join()
// (event record + wait: inside a graph capture they become its edges), so e.g. the MoE's shared
// expert overlaps the routed experts. On the host, and wherever overlap is off (an observer on
// the context: profiling, the gate, calibration; a host bounce; env STRATA_NO_SIDE_STREAM=1),
// run() simply runs the work in order.
//
// Memory: tensors are freed back to their allocator when their handles die on the host, and
// the allocators assume one stream's order. So every block allocated inside run() is kept
// alive until join(): the main branch cannot take memory the side branch may still use, and
// the side branch allocates nothing after run() returns. Call run() before enqueueing the main
// branch's work, and keep the side branch's inputs and outputs alive until after join().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "ops/registry.h"

namespace strata::ops {

class SideBranch {
 public:
  explicit SideBranch(OpContext& ctx);  // the fork point: after the ops enqueued so far
  ~SideBranch();                        // joins if join() was not called
  SideBranch(const SideBranch&) = delete;
  SideBranch& operator=(const SideBranch&) = delete;

  void run(const std::function<void()>& work);
  void join();  // the step stream waits for the side work; the kept blocks are released

 private:
  OpContext& ctx_;
  void* side_ = nullptr;  // the side stream, or nullptr: run() runs inline
  bool joined_ = false;
  std::vector<std::shared_ptr<Storage>> kept_;
};

// False when env STRATA_NO_SIDE_STREAM=1 (A/B measurements), else true.
bool side_streams_enabled();
// Side branches that forked onto a side stream since start-up (tests, diagnostics).
int64_t side_branches_overlapped();

}  // namespace strata::ops
