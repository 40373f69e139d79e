#include "model/nemotron_h/dummy_weights.h"

#include "model/nemotron_h/synthetic_plan.h"
#include "model/nemotron_h/tensor_source.h"

namespace strata::model {

namespace {
constexpr int64_t kDeviceMinElements = 65536;  // smaller tensors are made on the host
}

ModelWeights load_dummy_weights(const ModelConfig& c, const SyntheticOptions& o, Device device,
                                void* stream, LoadReport* report) {
  TensorMapSource src("dummy weights of " + c.source);
  for (const SyntheticTensor& t : synthetic_plan(c, o)) {
    if (device != Device::Host && t.shape.numel() >= kDeviceMinElements) {
      Tensor d = Tensor::empty(t.shape, t.dtype, device);
      fill_synthetic_device(t, d, stream);
      report->device_generated_bytes += d.nbytes();
      src.add(t.name, std::move(d));
    } else {
      Tensor h = materialize_synthetic(t);
      report->host_copied_bytes += h.nbytes();
      src.add(t.name, std::move(h));
    }
  }
  ModelWeights w = load_weights(src, c);
  report->host_copied_bytes += w.report.converted_bytes;
  report->tensors = w.report.tensors;
  return w;
}

}  // namespace strata::model
