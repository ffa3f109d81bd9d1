// Encoding and checking the KERNEL_META payload (layout in docs/format.md, "Kernel events").
#include "base/kernel_meta.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cstring>

namespace nanotrace::file {
namespace {

struct FixedPart {
  uint32_t magic;
  uint32_t version;
  uint32_t clock;
  uint32_t page_size;
  uint32_t long_size;
  uint32_t cpus;
  uint64_t start_ticks;
  uint32_t events;
  uint32_t header_page_size;
};
static_assert(sizeof(FixedPart) == 40);

struct LossPart {
  uint32_t cpu;
  uint32_t reserved;
  uint64_t overrun;
  uint64_t dropped;
  uint64_t pages;
};
static_assert(sizeof(LossPart) == 32);

// resize + memcpy rather than insert: g++ 12 warns (-Wstringop-overflow) about the
// inlined insert of a byte range it cannot size.
void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) { put(out, &v, 4); }

void pad8(std::vector<uint8_t>& out) {
  while (out.size() % 8) out.push_back(0);
}

// What a uname field of a payload may hold: bounded, and no control character (each is shown
// on a terminal and written into exports as it is).
bool valid_uname_field(const std::string& s) {
  return s.size() <= kMaxUnameField && std::none_of(s.begin(), s.end(), [](char c) {
           const auto b = static_cast<unsigned char>(c);
           return b < 0x20 || b == 0x7f;
         });
}

std::string uname_field(const char* s) {
  std::string out(s, strnlen(s, kMaxUnameField));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool take(void* dst, size_t n) {
    if (n_ - at_ < n) return false;
    std::memcpy(dst, p_ + at_, n);
    at_ += n;
    return true;
  }
  bool text(std::string* s, uint32_t n) {
    if (n_ - at_ < n) return false;
    s->assign(reinterpret_cast<const char*>(p_ + at_), n);
    at_ += n;
    return true;
  }
  bool align8() {
    size_t next = (at_ + 7) & ~size_t{7};
    if (next > n_) return false;
    at_ = next;
    return true;
  }
  bool done() const { return at_ == n_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

}  // namespace

KernelUname local_uname() {
  struct utsname u;
  if (::uname(&u) != 0) return {};
  return {uname_field(u.sysname), uname_field(u.release), uname_field(u.version),
          uname_field(u.machine)};
}

std::vector<uint8_t> encode_kernel_meta(const KernelMeta& m) {
  std::vector<uint8_t> out;
  FixedPart f{kKernelMetaMagic,
              kKernelMetaVersion,
              static_cast<uint32_t>(m.clock),
              m.page_size,
              m.long_size,
              m.cpus,
              m.start_ticks,
              static_cast<uint32_t>(m.events.size()),
              static_cast<uint32_t>(m.header_page.size())};
  put(out, &f, sizeof(f));
  for (uint32_t cpu = 0; cpu < m.cpus; ++cpu) {
    LossPart l{cpu, 0, 0, 0, 0};
    for (const KernelCpuLoss& x : m.losses) {
      if (x.cpu == cpu) l = LossPart{cpu, 0, x.overrun, x.dropped, x.pages};
    }
    put(out, &l, sizeof(l));
  }
  put(out, m.header_page.data(), m.header_page.size());
  pad8(out);
  for (const KernelEventFormat& e : m.events) {
    put_u32(out, static_cast<uint32_t>(e.system.size()));
    put_u32(out, static_cast<uint32_t>(e.format.size()));
    put(out, e.system.data(), e.system.size());
    put(out, e.format.data(), e.format.size());
    pad8(out);
  }
  const std::string* uname[] = {&m.uname.sysname, &m.uname.release, &m.uname.version,
                                &m.uname.machine};
  for (const std::string* u : uname) {
    put_u32(out, static_cast<uint32_t>(std::min<size_t>(u->size(), kMaxUnameField)));
  }
  for (const std::string* u : uname)
    put(out, u->data(), std::min<size_t>(u->size(), kMaxUnameField));
  pad8(out);
  return out;
}

Result<KernelMeta> decode_kernel_meta(const uint8_t* data, size_t size) {
  Cursor c(data, size);
  FixedPart f;
  if (!c.take(&f, sizeof(f))) return Status::Corrupt("kernel meta: truncated header");
  if (f.magic != kKernelMetaMagic) return Status::Corrupt("kernel meta: bad magic");
  if (f.version != 1 && f.version != kKernelMetaVersion) {
    return Status::Corrupt("kernel meta: version " + std::to_string(f.version));
  }
  if (f.clock > 1) return Status::Corrupt("kernel meta: unknown clock");
  if (f.page_size < 4096 || f.page_size > kMaxKernelPage || (f.page_size & (f.page_size - 1))) {
    return Status::Corrupt("kernel meta: bad sub-buffer size " + std::to_string(f.page_size));
  }
  if (f.long_size != 8 && f.long_size != 4) return Status::Corrupt("kernel meta: bad long size");
  if (f.cpus == 0 || f.cpus > kMaxKernelCpus) return Status::Corrupt("kernel meta: bad CPU count");
  if (f.events > kMaxKernelEvents) return Status::Corrupt("kernel meta: too many events");
  KernelMeta m;
  m.clock = static_cast<KernelClock>(f.clock);
  m.page_size = f.page_size;
  m.long_size = f.long_size;
  m.cpus = f.cpus;
  m.start_ticks = f.start_ticks;
  for (uint32_t i = 0; i < f.cpus; ++i) {
    LossPart l;
    if (!c.take(&l, sizeof(l))) return Status::Corrupt("kernel meta: truncated loss table");
    m.losses.push_back({i, l.overrun, l.dropped, l.pages});
  }
  if (!c.text(&m.header_page, f.header_page_size) || !c.align8()) {
    return Status::Corrupt("kernel meta: truncated header_page");
  }
  for (uint32_t i = 0; i < f.events; ++i) {
    uint32_t sizes[2];
    KernelEventFormat e;
    if (!c.take(sizes, sizeof(sizes)) || sizes[0] == 0 || sizes[0] > 64 ||
        !c.text(&e.system, sizes[0]) || !c.text(&e.format, sizes[1]) || !c.align8()) {
      return Status::Corrupt("kernel meta: truncated event format " + std::to_string(i));
    }
    m.events.push_back(std::move(e));
  }
  if (f.version >= 2) {
    uint32_t sizes[4];
    std::string* uname[] = {&m.uname.sysname, &m.uname.release, &m.uname.version, &m.uname.machine};
    if (!c.take(sizes, sizeof(sizes))) return Status::Corrupt("kernel meta: truncated uname");
    for (int i = 0; i < 4; ++i) {
      if (sizes[i] > kMaxUnameField || !c.text(uname[i], sizes[i]) ||
          !valid_uname_field(*uname[i])) {
        return Status::Corrupt("kernel meta: bad uname field " + std::to_string(i));
      }
    }
    if (!c.align8()) return Status::Corrupt("kernel meta: truncated uname");
  }
  if (!c.done()) return Status::Corrupt("kernel meta: bytes after the last event format");
  return m;
}

}  // namespace nanotrace::file
