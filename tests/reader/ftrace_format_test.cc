// The stored ftrace format parser: the kernel's own texts (kinds of field it prints, and every
// format of the running kernel), and hostile texts, which must be refused, never guessed at.
#include "reader/ftrace_format.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/prerequisite.hpp"

namespace nanotrace::reader {
namespace {

const char kSchedSwitch[] =
    "name: sched_switch\n"
    "ID: 372\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
    "\tfield:const char * filename;\toffset:40;\tsize:8;\tsigned:0;\n"
    "\tfield:__data_loc char[] name;\toffset:48;\tsize:4;\tsigned:0;\n"
    "\tfield:__rel_loc char[] rel;\toffset:52;\tsize:4;\tsigned:0;\n"
    "\tfield:__u8 saddr[sizeof(struct sockaddr_in6)];\toffset:56;\tsize:28;\tsigned:0;\n"
    "\tfield:unsigned long args[6];\toffset:88;\tsize:48;\tsigned:0;\n"
    "\n"
    "print fmt: \"prev_comm=%s\", REC->prev_comm, (( { 0x1, \"S\" } ) ? \"+\" : \"\")\n";

const char kHeaderPage[] =
    "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
    "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
    "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

TEST(FtraceFormatTest, ReadsEveryKindOfFieldTheKernelPrints) {
  auto f = parse_ftrace_format(kSchedSwitch);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->name, "sched_switch");
  EXPECT_EQ(f->id, 372u);
  ASSERT_EQ(f->common_fields.size(), 4u);
  EXPECT_EQ(f->common_fields[3].name, "common_pid");
  EXPECT_EQ(f->common_fields[3].offset, 4u);
  EXPECT_TRUE(f->common_fields[3].is_signed);
  ASSERT_EQ(f->fields.size(), 8u);
  const FtraceField& comm = f->fields[0];
  EXPECT_EQ(comm.name, "prev_comm");
  EXPECT_EQ(comm.type, "char");
  EXPECT_EQ(comm.offset, 8u);
  EXPECT_EQ(comm.size, 16u);
  EXPECT_TRUE(comm.is_array);
  EXPECT_TRUE(comm.is_text());
  EXPECT_FALSE(comm.is_signed);
  EXPECT_TRUE(f->fields[1].is_signed);
  EXPECT_EQ(f->fields[1].type, "pid_t");
  const FtraceField& filename = f->fields[3];
  EXPECT_EQ(filename.type, "const char *");
  EXPECT_TRUE(filename.is_pointer);
  EXPECT_FALSE(filename.is_text());
  const FtraceField& name = f->fields[4];
  EXPECT_EQ(name.name, "name");
  EXPECT_TRUE(name.is_dynamic);
  EXPECT_FALSE(name.is_relative);
  EXPECT_TRUE(name.is_text());
  EXPECT_TRUE(f->fields[5].is_dynamic);
  EXPECT_TRUE(f->fields[5].is_relative);
  const FtraceField& saddr = f->fields[6];
  EXPECT_EQ(saddr.name, "saddr");
  EXPECT_EQ(saddr.type, "__u8");
  EXPECT_TRUE(saddr.is_array);
  EXPECT_FALSE(saddr.is_text());
  EXPECT_EQ(f->fields[7].size, 48u);
  EXPECT_FALSE(f->fields[7].is_text());
}

TEST(FtraceFormatTest, HeaderPageGivesTheCommitWordsSize) {
  auto size = parse_header_page_commit_size(kHeaderPage);
  ASSERT_TRUE(size.ok()) << size.status().message();
  EXPECT_EQ(*size, 8u);
  EXPECT_FALSE(parse_header_page_commit_size("\tfield: u64 timestamp;\toffset:0;\tsize:8;\n").ok());
  EXPECT_FALSE(parse_header_page_commit_size("commit\n").ok());
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(FtraceFormatTest, RefusesWhatIsNotTheKernelsLayout) {
  const std::string good = kSchedSwitch;
  const std::pair<std::string, std::string> damage[] = {
      {"name: sched_switch", "nme: sched_switch"},
      {"name: sched_switch", "name: "},
      {"name: sched_switch", "name: two words"},
      {"ID: 372", "ID: 65536"},
      {"ID: 372", "ID: -1"},
      {"ID: 372", "ID: 0x10"},
      {"ID: 372", "ID: 372x"},
      {"format:\n", "fmt:\n"},
      {"offset:8;", "offset:2147483648;"},
      {"offset:8;", "offset:-8;"},
      {"offset:8;", ""},
      {"size:16;", "size:;"},
      {"signed:1;", "signed:2;"},
      {"prev_comm[16]", "prev_comm[16"},
      {"prev_comm[16]", "prev_comm]16]"},
      {"char prev_comm[16]", "[16]"},
      {"char prev_comm", "prev_comm"},
      {"pid_t prev_pid", "pid_t 9pid"},
      {"\tfield:pid_t prev_pid;", "\tfield:pid_t prev_pid"},
      {"\tfield:long", "\tnot a field:long"},
      {"signed:0;\n\tfield:pid_t", "signed:0\n\tfield:pid_t"},
      {"const char *", std::string("const \x01 char *")},
  };
  for (const auto& [from, to] : damage) {
    auto f = parse_ftrace_format(replaced(good, from, to));
    EXPECT_FALSE(f.ok()) << from << " -> " << to;
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), StatusCode::kCorrupt);
    }
  }
  EXPECT_FALSE(parse_ftrace_format("").ok());
  EXPECT_FALSE(parse_ftrace_format("name: x\nID: 1\nformat:\n\n").ok());  // no common fields
  EXPECT_FALSE(parse_ftrace_format(std::string(kMaxFtraceFormatBytes + 1, 'x')).ok());
  std::string many = "name: many\nID: 1\nformat:\n";
  for (size_t i = 0; i <= kMaxFtraceFields; ++i) {
    many += "\tfield:int f" + std::to_string(i) + ";\toffset:0;\tsize:4;\tsigned:1;\n";
  }
  EXPECT_FALSE(parse_ftrace_format(many).ok());
  // A NUL in the text is not text.
  std::string nul = good;
  nul[nul.find("prev_pid")] = '\0';
  EXPECT_FALSE(parse_ftrace_format(nul).ok());
}

TEST(FtraceFormatTest, WhatFollowsTheFieldsIsNotRead) {
  // Attributes a later kernel might add are skipped; the print fmt may be anything.
  auto f = parse_ftrace_format(
      replaced(replaced(kSchedSwitch, "size:2;\tsigned:0;", "size:2;\tsigned:0;\tfuture:7;"),
               "print fmt: ", "print fmt: ((((((((( \"unbalanced"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->fields.size(), 8u);
  // Old kernels print no sign.
  auto old = parse_ftrace_format(replaced(kSchedSwitch, "\tsigned:1;\n\n", "\n\n"));
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_FALSE(old->common_fields[3].is_signed);
}

// Every format of the running kernel parses, with a common_pid and fields inside the event's
// page: what the recorder stores is what the reader reads.
TEST(FtraceFormatTest, EveryFormatOfTheRunningKernelParses) {
  const std::filesystem::path events = "/sys/kernel/tracing/events";
  NANOTRACE_REQUIRE(std::filesystem::exists(events / "header_page") ||
                        std::system("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null") == 0,
                    "no tracefs at /sys/kernel/tracing");
  size_t parsed = 0;
  std::string failures;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(events)) {
    if (entry.path().filename() != "format") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    auto f = parse_ftrace_format(text.str());
    if (!f.ok()) {
      failures += entry.path().string() + ": " + f.status().message() + "\n";
      continue;
    }
    bool has_pid = false;
    for (const FtraceField& c : f->common_fields) has_pid = has_pid || c.name == "common_pid";
    if (!has_pid) failures += entry.path().string() + ": no common_pid\n";
    ++parsed;
  }
  EXPECT_EQ(failures, "");
  EXPECT_GT(parsed, 100u);
  std::ifstream in(events / "header_page");
  std::stringstream text;
  text << in.rdbuf();
  auto commit = parse_header_page_commit_size(text.str());
  ASSERT_TRUE(commit.ok()) << commit.status().message();
  EXPECT_EQ(*commit, sizeof(long));
}

}  // namespace
}  // namespace nanotrace::reader
