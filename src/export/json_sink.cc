// TextSink (see json_sink.hpp).
#include "export/json_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/output_file.hpp"
#include "export/json_text.hpp"
#include "export/output.hpp"

namespace nanotrace::exporter {

TextSink::~TextSink() {
  stop_writer();
  if (own_fd_ && fd_ >= 0) ::close(fd_);
}

Status TextSink::open(const std::string& path, size_t max_record) {
  path_ = path;
  if (path == "-") {
    fd_ = STDOUT_FILENO;
  } else {
    auto fd = create_output_file(path);
    if (!fd.ok()) return fd.status();
    fd_ = *fd;
    own_fd_ = true;
  }
  capacity_ = kChunk + max_record + json::kSlack;
  for (auto& s : storage_) s = std::make_unique<char[]>(capacity_);
  buf_ = pos_ = storage_[0].get();
  writer_ = std::thread([this] { writer_loop(); });
  return Status::Ok();
}

void TextSink::append(std::string_view text) {
  while (!text.empty()) {
    size_t n = std::min(text.size(), kChunk - static_cast<size_t>(pos_ - buf_));
    std::memcpy(pos_, text.data(), n);
    commit(pos_ + n);
    text.remove_prefix(n);
  }
}

void TextSink::flush() {
  size_t n = static_cast<size_t>(pos_ - buf_);
  if (n == 0) return;
  {
    std::unique_lock lock(mu_);
    filled_[current_] = n;
    ++pending_;
    cv_.notify_all();
    // The next buffer is the oldest queued one when all are queued: wait until it is written.
    cv_.wait(lock, [this] { return pending_ < kBuffers; });
  }
  queued_ += n;
  current_ = (current_ + 1) % kBuffers;
  buf_ = pos_ = storage_[current_].get();
}

void TextSink::writer_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return pending_ > 0 || stop_; });
    if (pending_ == 0) return;  // stopped, nothing left
    const char* data = storage_[next_write_].get();
    size_t n = filled_[next_write_];
    bool failed = error_ != 0;
    lock.unlock();
    int err = failed ? 0 : write_all(fd_, data, n);
    lock.lock();
    if (err != 0) error_ = err;
    next_write_ = (next_write_ + 1) % kBuffers;
    --pending_;
    cv_.notify_all();
  }
}

void TextSink::stop_writer() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

Status TextSink::close() {
  if (fd_ < 0) return Status::Ok();
  flush();
  stop_writer();  // the writer empties its queue before it stops
  int error = error_;
  if (own_fd_ && ::close(fd_) != 0 && error == 0) error = errno;
  fd_ = -1;
  if (error != 0) return Status::FromErrno("cannot write " + path_, error);
  return Status::Ok();
}

}  // namespace nanotrace::exporter
