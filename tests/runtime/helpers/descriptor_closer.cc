// Test helper: a program, traced without `run`'s interposer, that closes the segment's
// descriptor behind the runtime's back (as a daemon closing every descriptor it did not open
// does) and puts a file of its own on that number, then starts threads that trace enough to
// need ring memory allocated.
//
//   descriptor_closer DIR THREADS RECORDS
//
// Prints "pid <pid>", then "file <size of its own file> <size it wrote>" and "ready" once the
// threads are done and the control thread has had time to take the segment back, and exits 0
// when stdin closes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/records.hpp"

namespace {

// The descriptor that names this process's segment (-1 if none).
int segment_descriptor() {
  const std::string segment = "/dev/shm/nanotrace-" + std::to_string(getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(entry.path(), ec) == segment) {
      return std::atoi(entry.path().filename().c_str());
    }
  }
  return -1;
}

void write_records(uint64_t thread, uint64_t records) {
  for (uint64_t seq = 0; seq < records; ++seq) {
    const uint64_t value = seq * 7 + thread;
    NANOTRACE(test, rec, "thread={} seq={} value={} check={}", thread, seq, value,
              nanotrace::testing::producer_checksum(thread, seq, value));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string path = std::string(argv[1]) + "/own-file";
  const int threads = std::atoi(argv[2]);
  const uint64_t records = std::strtoull(argv[3], nullptr, 10);
  std::printf("pid %d\n", getpid());
  std::fflush(stdout);
  write_records(0, 1);  // starts the runtime: the segment exists from here
  const int taken = segment_descriptor();
  if (taken < 0) return 3;
  ::close(taken);
  const int own = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (own < 0 || (own != taken && dup2(own, taken) != taken)) return 4;
  if (::write(taken, "mine", 4) != 4) return 5;

  std::vector<std::thread> workers;
  for (int t = 1; t <= threads; ++t) workers.emplace_back(write_records, t, records);
  for (auto& w : workers) w.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few control passes
  struct stat st;
  if (fstat(taken, &st) != 0) return 6;
  std::printf("file %lld 4\nready\n", static_cast<long long>(st.st_size));
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
