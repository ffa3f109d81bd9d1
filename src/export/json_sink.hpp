// The output of the exporters' fast paths (Chrome JSON, Perfetto protobuf): a buffer that
// records are encoded into through a raw pointer (json_text.hpp, ProtoRaw), written with
// write(2) in kChunk pieces. The capacity past kChunk is the largest record plus
// json::kSlack, so one check per record suffices.
//
// Writing to a file costs the kernel about as much CPU (page-cache copy) as encoding costs
// us, so a second thread writes the filled buffers, in order, while the caller fills the
// next one: with a free core the copy overlaps the encoding. Memory: kBuffers chunks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "nanotrace/status.hpp"

namespace nanotrace::exporter {

class TextSink {
 public:
  static constexpr size_t kChunk = size_t{1} << 20;
  static constexpr int kBuffers = 2;

  TextSink() = default;
  ~TextSink();
  TextSink(const TextSink&) = delete;
  TextSink& operator=(const TextSink&) = delete;

  // Creates path (create_output_file: mode 0600, a new file), "-" being standard output.
  // max_record: the most bytes one record may take (what may be written at cursor() before
  // commit()).
  Status open(const std::string& path, size_t max_record);
  // Where the next record goes; room for max_record bytes plus json::kSlack.
  char* cursor() const { return pos_; }
  // Ends the record at end.
  void commit(char* end) {
    pos_ = end;
    if (static_cast<size_t>(pos_ - buf_) >= kChunk) flush();
  }
  // Text of any length (headers, trailers).
  void append(std::string_view text);
  // Writes out what is buffered and closes; reports the first write error.
  Status close();
  uint64_t bytes() const { return queued_ + static_cast<uint64_t>(pos_ - buf_); }
  // Memory held for buffers.
  size_t buffer_bytes() const { return kBuffers * capacity_; }

 private:
  // Queues the filled buffer for the writer thread and continues in the next one.
  void flush();
  void stop_writer();
  void writer_loop();

  std::string path_;
  int fd_ = -1;
  bool own_fd_ = false;
  uint64_t queued_ = 0;  // bytes handed to the writer
  size_t capacity_ = 0;
  std::unique_ptr<char[]> storage_[kBuffers];
  int current_ = 0;  // the buffer being filled
  char* buf_ = nullptr;
  char* pos_ = nullptr;

  // Shared with the writer thread, which writes buffers in the order they were filled.
  std::mutex mu_;
  std::condition_variable cv_;
  size_t filled_[kBuffers] = {};  // bytes of each queued buffer
  int pending_ = 0;               // buffers queued, the oldest at next_write_
  int next_write_ = 0;
  bool stop_ = false;
  int error_ = 0;  // first write error (errno), sticky
  std::thread writer_;
};

}  // namespace nanotrace::exporter
