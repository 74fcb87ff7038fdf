// The check that a command's output is not a file it reads (mlalpha/model.h, check_output_not_read).
#include <filesystem>
#include <optional>
#include <utility>

#include "core/error.h"
#include "data/fileio.h"
#include "mlalpha/model.h"

namespace mlalpha {

void check_output_not_read(const std::string& flag, const std::string& value, const std::string& target,
                           const std::string& checkpoint, const DataConfig& d) {
  ReadFiles read;
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"data.csv", d.csv}, {"data.features", d.features},
                                   {"data.targets", d.targets}, {"--checkpoint", checkpoint},
                                   {"the checkpoint's", checkpoint + ".optim.safetensors"}})
    if (!path.empty()) read.add(what, path);
  std::error_code ec;
  if (std::filesystem::is_directory(checkpoint, ec))
    for (auto it = std::filesystem::recursive_directory_iterator(checkpoint, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) read.add("the --checkpoint folder's", it->path().string());
  if (const std::optional<std::string> same = read.which(target))
    throw Error(flag + " " + value + ": " + target + " is the same file as " + *same +
                ": the command would write over a file it reads (give another " + flag + ")");
}

}  // namespace mlalpha
