// Factories of the concrete targets, shared by target_open.cc and the target_*.cc files.
#pragma once

#include <memory>
#include <string>

#include "iograph/target.hpp"

namespace iograph::internal {

std::unique_ptr<Target> make_nop_target();
Result<std::unique_ptr<Target>> open_file_target(const std::string& path, bool is_zero);
Result<std::unique_ptr<Target>> open_loop_target(const TargetOptions& options);

}  // namespace iograph::internal
