#pragma once
// The parameter table: every tensor of a model as (name, shape, offset, decay flag) inside one flat
// arena. Parameters, gradients and the two AdamW moments are four arenas with this same layout, so
// the global grad norm and AdamW are single launches over flat memory (DESIGN section 2).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlalpha {

struct ParamTensor {
  std::string name;             // PyTorch / mamba_ssm name, e.g. "layers.0.mixer.in_proj.weight"
  std::vector<int64_t> shape;   // PyTorch shape
  size_t offset = 0;            // in elements from the arena start
  size_t numel = 0;
  bool decay = true;            // AdamW weight decay applies (false: norms, biases, A_log, D, dt_bias)
};

class ParamTable {
 public:
  // Offsets are rounded up to kAlign elements (256 bytes of fp32) so every tensor starts on a
  // vector-load boundary; the gaps stay zero in all four arenas.
  static constexpr size_t kAlign = 64;

  size_t add(std::string name, std::vector<int64_t> shape, bool decay);  // returns the offset
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& at(const std::string& name) const;  // throws naming the missing tensor
  // Arena length in elements, padding included, rounded up to kAlign so vectorised kernels (float4) cover
  // it exactly.
  size_t total() const { return (total_ + kAlign - 1) / kAlign * kAlign; }
  size_t count() const;                                  // real parameters (padding excluded)
  // 1 where weight decay applies, 0 elsewhere (padding included): the no-decay mask as data.
  std::vector<unsigned char> decay_mask() const;

 private:
  std::vector<ParamTensor> tensors_;
  size_t total_ = 0;
};

}  // namespace mlalpha
