// Checking and reading the NODE chunk (base/node_meta.hpp). Nothing in a payload is trusted:
// strings are bounded and printable, counts and brackets are checked, the alignment's rates
// are non-zero and its arithmetic cannot overflow.
#include "base/node_meta.hpp"

#include <cstring>

namespace nanotrace::file {
namespace {

bool printable_text(const char* buffer, size_t size) {
  const void* nul = std::memchr(buffer, 0, size);
  if (nul == nullptr) return false;
  for (const char* p = buffer; p != nul; ++p) {
    auto c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

const char* sync_source_name(SyncSource source) {
  switch (source) {
    case SyncSource::kChrony:
      return "chrony";
    case SyncSource::kPtp:
      return "ptp4l";
    default:
      return "unknown";
  }
}

std::string node_text(const char* buffer, size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

void set_node_text(char* buffer, size_t size, const std::string& text) {
  std::memset(buffer, 0, size);
  size_t n = text.size() < size - 1 ? text.size() : size - 1;
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    buffer[i] = c < 0x20 || c == 0x7f ? '_' : text[i];
  }
}

Result<NodePayload> decode_node(const void* data, size_t size) {
  NodePayload n;
  if (size != sizeof(n)) {
    return Status::Corrupt("node chunk of " + std::to_string(size) + " bytes (expected " +
                           std::to_string(sizeof(n)) + ")");
  }
  std::memcpy(&n, data, sizeof(n));
  if (n.magic != kNodeMagic) return Status::Corrupt("node chunk with a bad magic");
  if (n.version != kNodeVersion) {
    return Status::Corrupt("node chunk version " + std::to_string(n.version));
  }
  if (n.node >= kMaxNodes) {
    return Status::Corrupt("node index " + std::to_string(n.node) + " out of range");
  }
  if (n.first_process > 0xffff) return Status::Corrupt("node's first process out of range");
  if (n.clock_kind > 1) return Status::Corrupt("node chunk with an unknown clock kind");
  if (n.pair_count == 0 || n.pair_count > kNodeMaxPairs) {
    return Status::Corrupt("node chunk with " + std::to_string(n.pair_count) + " clock pairs");
  }
  for (uint32_t i = 0; i < n.pair_count; ++i) {
    const NodeClockPair& p = n.pairs[i];
    // A pair bracketed by more than a second is not a measurement.
    if (p.ticks_after < p.ticks_before || p.ticks_after - p.ticks_before > (1ull << 40)) {
      return Status::Corrupt("node chunk with a malformed clock pair");
    }
  }
  if (!printable_text(n.hostname, sizeof(n.hostname)) ||
      !printable_text(n.machine_id, sizeof(n.machine_id)) ||
      !printable_text(n.boot_id, sizeof(n.boot_id)) ||
      !printable_text(n.sync_reference, sizeof(n.sync_reference))) {
    return Status::Corrupt("node chunk with a malformed name");
  }
  if (n.sync_source > static_cast<uint32_t>(SyncSource::kPtp)) {
    return Status::Corrupt("node chunk with an unknown clock-sync source");
  }
  if (n.origin_present > 1 || n.origin_process > 0xffff) {
    return Status::Corrupt("node chunk with a malformed trigger origin");
  }
  if (n.alignment > static_cast<uint32_t>(NodeAlignment::kRealtime)) {
    return Status::Corrupt("node chunk with an unknown alignment");
  }
  // Rates are clock frequencies (Hz): bounded so that (t - node_ticks) * num fits in 128 bits
  // and the ratio is near 1 (two clocks that count the same seconds).
  constexpr uint64_t kMaxRate = 1ull << 40;
  if (n.align_num == 0 || n.align_den == 0 || n.align_num > kMaxRate || n.align_den > kMaxRate ||
      n.align_num > 64 * n.align_den || n.align_den > 64 * n.align_num) {
    return Status::Corrupt("node chunk with a malformed clock alignment");
  }
  return n;
}

NodeInstant best_pair(const NodePayload& node) {
  NodeInstant best;
  uint64_t span = ~0ull;
  for (uint32_t i = 0; i < node.pair_count && i < kNodeMaxPairs; ++i) {
    const NodeClockPair& p = node.pairs[i];
    if (p.ticks_after < p.ticks_before || p.ticks_after - p.ticks_before >= span) continue;
    span = p.ticks_after - p.ticks_before;
    best.half_bracket_ticks = (span + 1) / 2;
    best.ticks = p.ticks_before + span / 2;
    best.realtime_ns = p.realtime_ns;
  }
  return best;
}

uint64_t align_ticks(const NodePayload& node, uint64_t ticks) {
  if (aligned_identity(node)) return ticks;
  const __int128 delta =
      static_cast<__int128>(ticks) - static_cast<__int128>(node.align_node_ticks);
  const __int128 scaled =
      delta * static_cast<__int128>(node.align_num) / static_cast<__int128>(node.align_den);
  const __int128 out = static_cast<__int128>(node.align_trace_ticks) + scaled;
  if (out < 0) return 0;
  if (out > static_cast<__int128>(~0ull)) return ~0ull;
  return static_cast<uint64_t>(out);
}

}  // namespace nanotrace::file
