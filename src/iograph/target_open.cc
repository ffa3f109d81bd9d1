// Target spec parsing ("nop", "zero", "file:PATH", "loop") and the error injection that the
// base class keeps for the nop target.
#include <fmt/format.h>

#include "iograph/target.hpp"
#include "targets_internal.hpp"

namespace iograph {

Status Target::inject_failure(uint32_t node, int error) {
  if (kind() != TargetKind::kNop) {
    return Status::Unsupported("error injection needs the nop target");
  }
  if (error >= 0) return Status::Invalid("an injected failure must be a negative errno");
  if (injected_.size() <= node) injected_.resize(node + 1, 0);
  injected_[node] = error;
  return Status::Ok();
}

Result<std::unique_ptr<Target>> open_target(std::string_view spec, const TargetOptions& options) {
  if (spec == "nop") return internal::make_nop_target();
  if (spec == "zero") return internal::open_file_target("/dev/zero", true);
  if (spec == "loop") return internal::open_loop_target(options);
  if (spec.starts_with("file:") && spec.size() > 5) {
    return internal::open_file_target(std::string(spec.substr(5)), false);
  }
  return Status::Invalid(
      fmt::format("unknown target '{}' (expected nop, zero, file:PATH or loop)", spec));
}

}  // namespace iograph
