#include "worker/datagen/layout.h"

#include <string>

namespace ps::datagen {

StatusOr<Layout> ParseLayout(std::string_view name) {
  if (name == "criteo") return Layout::kCriteo;
  if (name == "onehot") return Layout::kOnehot;
  if (name == "avazu") return Layout::kAvazu;
  return InvalidArgument("--layout must be criteo, onehot or avazu, not '" +
                         std::string(name) + "'");
}

}  // namespace ps::datagen
