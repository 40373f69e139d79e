#include "model/nemotron_h/synthetic.h"

#include <cmath>

#include "model/nemotron_h/synthetic_plan.h"

namespace strata::model {

uint64_t SplitMix::next() {
  uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double SplitMix::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

TensorMapSource make_synthetic_weights(const ModelConfig& c, const SyntheticOptions& o) {
  TensorMapSource src("synthetic " + c.source);
  for (const SyntheticTensor& t : synthetic_plan(c, o))
    src.add(t.name, materialize_synthetic(t));
  return src;
}

}  // namespace strata::model
