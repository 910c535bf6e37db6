#include <memory>

#include "config/errors.hpp"
#include "inference/classifier.hpp"

namespace vc::inference {

std::unique_ptr<Classifier> make_cuda_classifier(LoadedModel, const config::Config&) {
  throw UnavailableError("the cuDNN engine has not landed yet: set inference.device: cpu");
}

}  // namespace vc::inference
