// io_uring requests as the kernel saw them (io_uring:io_uring_submit_req, io_uring_file_get,
// io_uring_complete, recorded with `--kernel io_uring`), for the I/O summary of programs that
// enter the kernel with their own system call instruction (fio's io_uring engine), whose
// requests the interposer cannot see. Internal header of the analysis library.
//
// A request opens at io_uring_submit_req made by a thread of a traced process (the kernel
// records every process's rings), learns its descriptor from io_uring_file_get, and closes at
// io_uring_complete with the same ring (ctx) and user_data: the one interval matcher pairs
// them. A request's latency is thus its time in the kernel from submission to completion,
// as the interposer's own io_uring rows measure it (from the SQE it saw before the program
// entered the kernel to the CQE after): it includes the submission, which fio counts apart
// (its slat), so it lies between fio's completion latency (clat) and its total (lat). Rings are
// told apart from those the interposer followed itself (so that no request counts twice) by
// io_uring_create, which names each ring's descriptor in its process: a ring whose descriptor has
// the interposer's io_uring:sqe records is the interposer's. A ring created before the capture
// began is the interposer's if its process has any.
//
// Thread safety: belongs to one thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "nanotrace/intervals.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::analysis {

class UringKernelRequests {
 public:
  // A request that completed.
  struct Done {
    uint64_t process = 0;  // index into Trace::processes()
    uint64_t ctx = 0;      // the kernel's ring
    int64_t fd = -1;       // -1: not named by io_uring_file_get (a registered file)
    std::string op;        // uring_read, uring_write, uring_fsync, uring_<opcode name>
    uint64_t begin_ns = 0, end_ns = 0;
    int64_t res = 0;
  };

  // Binds to trace's kernel events; active() is false without submit and complete events.
  explicit UringKernelRequests(const Trace& trace);
  bool active() const { return active_; }

  // Feeds one kernel record (in time order). Returns the request it completed, or null
  // (valid until the next call).
  const Done* add(const Record& record);
  // The interposer recorded requests of its ring `fd` in process `process`.
  void note_interposer_ring(uint64_t process, int64_t fd) {
    interposer_rings_.insert({process, fd});
  }
  // True if the interposer followed the ring (its requests are counted from its records).
  bool followed_by_interposer(uint64_t process, uint64_t ctx) const;
  // Requests submitted and never completed.
  uint64_t open_requests() const { return open_.size(); }

 private:
  struct Fields {
    int ctx = -1, user_data = -1, opcode = -1, op_str = -1, fd = -1, res = -1;
  };
  enum class Kind : uint8_t { kNone, kSubmit, kFileGet, kComplete, kCreate };
  struct Open {
    uint64_t process;
    int64_t fd = -1;
    std::string op;
  };
  using Key = std::pair<uint64_t, uint64_t>;  // (ctx, user_data)
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.first * 0x9e3779b97f4a7c15ull ^ k.second; }
  };

  bool active_ = false;
  std::vector<Kind> kinds_;  // by kernel event id
  std::vector<Fields> fields_;
  std::unordered_map<uint64_t, uint64_t> process_of_tid_;
  IntervalMatcher matcher_;
  std::unordered_map<Key, Open, KeyHash> open_;  // what the matcher's open intervals are
  std::map<uint64_t, std::pair<uint64_t, int64_t>> ring_fd_;  // ctx -> (process, fd)
  std::set<std::pair<uint64_t, int64_t>> interposer_rings_;
  Done done_;
};

}  // namespace nanotrace::analysis
