// Sandbox limits. A chat template is code from a model repository (or a request) and runs inside
// the server: it must not loop forever, fill memory or overflow the stack. Every limit ends the
// render with TemplateError (Kind::Limit) naming the limit; none of them is reached by real chat
// templates on real conversations (those take thousands of steps and kilobytes).
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::jinja {

struct Limits {
  uint64_t max_steps = 5'000'000;         // expression and statement evaluations per render
  size_t max_output_bytes = 64u << 20;    // the rendered text, and any one string value
  uint64_t max_alloc_bytes = 1ull << 30;  // strings and lists built over a whole render
  int max_call_depth = 64;                // nested macro / caller() / recursive loop calls
  int max_nesting = 256;                  // parser: nested expressions, brackets and blocks
  int max_eval_depth = 1000;              // nested evaluations at run time (bounds the stack)
};

class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}

  const Limits& limits() const { return limits_; }
  void step() {
    if (++steps_ > limits_.max_steps) steps_exceeded();
  }
  // Work proportional to data size (a filter over a long list, a method on a long string) costs
  // steps too, so a loop around it cannot run for minutes on few steps.
  void steps(uint64_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps) steps_exceeded();
  }
  // Called before building a string or list of about `bytes` bytes.
  void charge(size_t bytes);
  uint64_t steps() const { return steps_; }

 private:
  [[noreturn]] void steps_exceeded() const;

  Limits limits_;
  uint64_t steps_ = 0;
  uint64_t allocated_ = 0;
};

}  // namespace strata::jinja
