// The nop target: operations become IORING_OP_NOP (or nothing for the sync backend), so a
// run measures pure scheduling cost.
#include "targets_internal.hpp"

namespace iograph::internal {
namespace {

class NopTarget final : public Target {
 public:
  TargetKind kind() const override { return TargetKind::kNop; }
  std::string describe() const override { return "nop (IORING_OP_NOP)"; }
  int fd() const override { return -1; }
  bool direct_io() const override { return false; }
  uint64_t size_bytes() const override { return 0; }
};

}  // namespace

std::unique_ptr<Target> make_nop_target() { return std::make_unique<NopTarget>(); }

}  // namespace iograph::internal
