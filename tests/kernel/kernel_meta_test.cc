// The KERNEL_META payload's uname section (version 2): it round-trips, a version 1 payload
// (written before the section existed) still decodes with an empty uname, and a uname that
// is too long or holds a control character is rejected as corrupt. No kernel needed.
#include "base/kernel_meta.hpp"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <cstring>
#include <string>
#include <vector>

namespace nanotrace {
namespace {

file::KernelMeta sample() {
  file::KernelMeta m;
  m.page_size = 4096;
  m.cpus = 2;
  m.start_ticks = 42;
  m.header_page = "field: u64 timestamp;\n";
  m.events.push_back({"block", "name: block_rq_issue\nID: 1\n"});
  m.losses = {{0, 1, 2, 3}, {1, 4, 5, 6}};
  m.uname = {"Linux", "6.1.0-18-amd64", "#1 SMP PREEMPT_DYNAMIC Debian", "x86_64"};
  return m;
}

// Where sample()'s uname section begins: its four sizes, then the strings padded to 8, end
// the payload.
size_t uname_offset(const std::vector<uint8_t>& payload) {
  const file::KernelMeta m = sample();
  const size_t strings = m.uname.sysname.size() + m.uname.release.size() + m.uname.version.size() +
                         m.uname.machine.size();
  return payload.size() - ((16 + strings + 7) & ~size_t{7});
}

TEST(KernelMetaTest, UnameRoundTrips) {
  const std::vector<uint8_t> payload = file::encode_kernel_meta(sample());
  auto m = file::decode_kernel_meta(payload.data(), payload.size());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->uname, sample().uname);
  EXPECT_EQ(m->events.size(), 1u);
  EXPECT_EQ(m->start_ticks, 42u);
}

TEST(KernelMetaTest, LocalUnameIsThisMachines) {
  struct utsname u;
  ASSERT_EQ(::uname(&u), 0);
  const file::KernelUname mine = file::local_uname();
  EXPECT_EQ(mine.sysname, u.sysname);
  EXPECT_EQ(mine.release, u.release);
  EXPECT_EQ(mine.version, u.version);
  EXPECT_EQ(mine.machine, u.machine);
}

TEST(KernelMetaTest, VersionOnePayloadDecodesWithoutUname) {
  // A version 1 payload is a version 2 one without the uname section.
  std::vector<uint8_t> payload = file::encode_kernel_meta(sample());
  payload.resize(uname_offset(payload));
  const uint32_t one = 1;
  std::memcpy(payload.data() + 4, &one, 4);
  auto m = file::decode_kernel_meta(payload.data(), payload.size());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->uname, file::KernelUname{});
  EXPECT_EQ(m->events.size(), 1u);
  // The same bytes claiming version 2 lack the section.
  const uint32_t two = 2;
  std::memcpy(payload.data() + 4, &two, 4);
  EXPECT_FALSE(file::decode_kernel_meta(payload.data(), payload.size()).ok());
}

TEST(KernelMetaTest, BadUnameIsCorrupt) {
  const std::vector<uint8_t> good = file::encode_kernel_meta(sample());
  const size_t at = uname_offset(good);
  {  // a size beyond 64
    std::vector<uint8_t> p = good;
    const uint32_t big = 65;
    std::memcpy(p.data() + at, &big, 4);
    auto m = file::decode_kernel_meta(p.data(), p.size());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("uname"), std::string::npos) << m.status().message();
  }
  {  // a size beyond the payload
    std::vector<uint8_t> p = good;
    const uint32_t huge = 0xffffffff;
    std::memcpy(p.data() + at + 4, &huge, 4);
    EXPECT_FALSE(file::decode_kernel_meta(p.data(), p.size()).ok());
  }
  {  // a control character in the release ("Linux" is 5 bytes, then the release)
    std::vector<uint8_t> p = good;
    p[at + 16 + 5 + 2] = '\n';
    auto m = file::decode_kernel_meta(p.data(), p.size());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("uname"), std::string::npos) << m.status().message();
  }
  {  // truncated inside the section
    std::vector<uint8_t> p(good.begin(), good.begin() + static_cast<long>(at + 8));
    EXPECT_FALSE(file::decode_kernel_meta(p.data(), p.size()).ok());
  }
  {  // encoding cuts an overlong field to 64 bytes, which then decodes
    file::KernelMeta m = sample();
    m.uname.version = std::string(100, 'v');
    const std::vector<uint8_t> p = file::encode_kernel_meta(m);
    auto d = file::decode_kernel_meta(p.data(), p.size());
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->uname.version, std::string(64, 'v'));
  }
}

}  // namespace
}  // namespace nanotrace
