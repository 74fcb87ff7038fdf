#include "core/param_table.h"

#include <algorithm>

#include "core/error.h"

namespace mlalpha {

size_t ParamTable::add(std::string name, std::vector<int64_t> shape, bool decay) {
  size_t numel = 1;
  for (int64_t d : shape) {
    require(d >= 1, "parameter " + name + " has a zero or negative dimension");
    numel *= static_cast<size_t>(d);
  }
  const size_t offset = (total_ + kAlign - 1) / kAlign * kAlign;
  tensors_.push_back({std::move(name), std::move(shape), offset, numel, decay});
  total_ = offset + numel;
  return offset;
}

const ParamTensor& ParamTable::at(const std::string& name) const {
  auto it = std::find_if(tensors_.begin(), tensors_.end(), [&](const ParamTensor& t) { return t.name == name; });
  require(it != tensors_.end(), "no parameter tensor named '" + name + "'");
  return *it;
}

size_t ParamTable::count() const {
  size_t n = 0;
  for (const auto& t : tensors_) n += t.numel;
  return n;
}

std::vector<unsigned char> ParamTable::decay_mask() const {
  std::vector<unsigned char> m(total(), 0);
  for (const auto& t : tensors_)
    if (t.decay) std::fill(m.begin() + t.offset, m.begin() + t.offset + t.numel, 1);
  return m;
}

}  // namespace mlalpha
