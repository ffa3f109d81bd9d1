// The KERNEL_META chunk of a trace file (docs/format.md, "Kernel events"): what a reader
// needs to decode the raw ftrace pages of the KERNEL_DATA chunks without the machine that
// recorded them: the clock, the sub-buffer size, the kernel's header_page description, the
// format text of every enabled event, the per-CPU loss counters, and the recording kernel's
// uname (readers interpret some events by kernel version). Encoded by the recorder
// (src/kernel), decoded and checked by the reader: every size in it is untrusted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::file {

inline constexpr uint32_t kKernelMetaMagic = 0x4d4b544e;  // "NTKM"
// Version 2 added the uname section; version 1 payloads still decode (with an empty uname).
inline constexpr uint32_t kKernelMetaVersion = 2;
inline constexpr uint32_t kMaxKernelCpus = 4096;
inline constexpr uint32_t kMaxKernelPage = 1u << 20;
inline constexpr uint32_t kMaxKernelEvents = 8192;
inline constexpr uint32_t kMaxUnameField = 64;  // the kernel's __NEW_UTS_LEN

enum class KernelClock : uint32_t {
  kTsc = 0,        // x86-tsc: the same ticks as a TSC-clocked process's records
  kMonotonic = 1,  // mono: CLOCK_MONOTONIC nanoseconds, as a monotonic-clocked process's
};

struct KernelCpuLoss {
  uint32_t cpu = 0;
  uint64_t overrun = 0;  // events the ring buffer overwrote before they were read
  uint64_t dropped = 0;  // events the kernel dropped (per_cpu/cpuN/stats "dropped events")
  uint64_t pages = 0;    // sub-buffers the recorder stored
};

struct KernelEventFormat {
  std::string system;  // e.g. "block"
  std::string format;  // events/<system>/<event>/format, as the kernel printed it
};

// uname(2) of the recording machine (nodename left out: it names the machine, not the
// kernel). Each at most kMaxUnameField bytes, without control characters.
struct KernelUname {
  std::string sysname;  // "Linux"
  std::string release;  // "6.1.0-18-amd64"
  std::string version;  // "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"
  std::string machine;  // "x86_64"
  bool operator==(const KernelUname&) const = default;
};

struct KernelMeta {
  KernelClock clock = KernelClock::kTsc;
  uint32_t page_size = 0;    // bytes per raw sub-buffer in KERNEL_DATA
  uint32_t long_size = 8;    // the kernel's sizeof(long)
  uint32_t cpus = 0;         // KERNEL_DATA slots are < cpus
  uint64_t start_ticks = 0;  // the clock when capture began: user records before it have no
                             // kernel counterpart
  std::string header_page;   // events/header_page
  std::vector<KernelEventFormat> events;
  std::vector<KernelCpuLoss> losses;  // one per CPU, the latest counters
  KernelUname uname;                  // empty when read from a version 1 payload
};

// This machine's uname(2), cut to kMaxUnameField bytes per field.
KernelUname local_uname();

std::vector<uint8_t> encode_kernel_meta(const KernelMeta& meta);
// Errors: kCorrupt, saying which bound failed.
Result<KernelMeta> decode_kernel_meta(const uint8_t* data, size_t size);

}  // namespace nanotrace::file
