// Kernel event capture: instance setup (clock, buffer size, events, thread filters), the
// per-CPU raw readers, and the formats and loss counters a reader needs.
#include "kernel/kernel_capture.hpp"

#include <dirent.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/clock.hpp"
#include "kernel/tracefs_cxx.hpp"

namespace nanotrace::kernel {
namespace {

// Sub-buffers one chunk carries at most (1 MiB of 4 KiB pages): the reader checks a whole
// chunk before it uses any of it.
constexpr size_t kPagesPerChunk = 256;

// The threads of the processes that are still alive, sorted.
std::vector<uint32_t> threads_of(const std::vector<uint32_t>& pids) {
  std::vector<uint32_t> out;
  for (uint32_t pid : pids) {
    DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      unsigned long v = std::strtoul(e->d_name, &end, 10);
      if (end != e->d_name && *end == '\0') out.push_back(static_cast<uint32_t>(v));
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t stat_value(const std::string& stats, const char* key) {
  size_t at = stats.find(key);
  if (at == std::string::npos) return 0;
  return std::strtoull(stats.c_str() + at + std::strlen(key), nullptr, 10);
}

std::string read_text(tracefs_instance* inst, const std::string& file) {
  int size = 0;
  char* text = tracefs_instance_file_read(inst, file.c_str(), &size);
  if (!text) return "";
  std::string out(text, size > 0 ? static_cast<size_t>(size) : 0);
  free(text);
  return out;
}

}  // namespace

Result<std::unique_ptr<KernelCapture>> KernelCapture::start(const CaptureOptions& options) {
  if (geteuid() != 0) return Status::IoError("--kernel needs root (tracefs)");
  auto events = resolve_groups(options.groups);
  if (!events.ok()) return events.status();
  std::unique_ptr<KernelCapture> c(new KernelCapture());
  c->options_ = options;
  c->events_ = std::move(*events);
  auto inst = FtraceInstance::create(options.flight);
  if (!inst.ok()) return inst.status();
  c->instance_ = std::move(*inst);
  if (Status s = c->configure_instance(); !s.ok()) return s;
  if (Status s = c->read_formats(); !s.ok()) return s;
  c->pids_ = {options.pid};
  c->tids_ = threads_of(c->pids_);
  if (Status s = c->apply_filters(); !s.ok()) return s;
  if (Status s = c->enable_events(); !s.ok()) return s;
  if (Status s = c->open_cpu_readers(); !s.ok()) return s;
  c->buf_.resize(kPagesPerChunk * c->page_size_);
  if (tracefs_trace_on(c->instance_->handle()) < 0) {
    return Status::FromErrno("tracefs: tracing_on", errno);
  }
  c->formats_.start_ticks = c->now_ticks();
  c->last_drain_ = sys::monotonic_seconds();
  return c;
}

Status KernelCapture::configure_instance() {
  // The x86-tsc clock, the buffer size and an instance of our own cost the traced workload no
  // more than trace-cmd's local clock, 1.4 MiB per CPU and top-level instance (measured:
  // docs/performance.md, kernel capture): ftrace's cost is the events themselves.
  const bool tsc = options_.clock == file::KernelClock::kTsc;
  if (Status s = instance_->write("trace_clock", tsc ? "x86-tsc" : "mono"); !s.ok()) return s;
  // A flight instance keeps the newest events (the default, set in case it was changed).
  if (options_.flight) {
    if (Status s = instance_->write("options/overwrite", "1"); !s.ok()) return s;
  }
  if (tracefs_instance_set_buffer_size(instance_->handle(), options_.buffer_kb, -1) < 0) {
    return Status::FromErrno("tracefs " + instance_->name() + ": buffer_size_kb", errno);
  }
  return Status::Ok();
}

Status KernelCapture::read_formats() {
  formats_.clock = options_.clock;
  formats_.long_size = sizeof(long);
  formats_.uname = file::local_uname();
  formats_.header_page = read_text(nullptr, "events/header_page");
  if (formats_.header_page.empty()) return Status::IoError("tracefs: no events/header_page");
  for (const EventSpec& e : events_) {
    std::string format =
        read_text(instance_->handle(), "events/" + e.system + "/" + e.event + "/format");
    if (format.empty()) {
      return Status::NotFound("tracefs: no format for " + e.system + ":" + e.event);
    }
    formats_.events.push_back({e.system, std::move(format)});
  }
  return Status::Ok();
}

Status KernelCapture::enable_events() {
  for (const EventSpec& e : events_) {
    errno = 0;
    if (tracefs_event_enable(instance_->handle(), e.system.c_str(), e.event.c_str()) < 0) {
      return Status::FromErrno("tracefs: enabling " + e.system + ":" + e.event,
                               errno ? errno : EIO);
    }
  }
  return Status::Ok();
}

Status KernelCapture::open_cpu_readers() {
  long n = sysconf(_SC_NPROCESSORS_CONF);
  cpu_count_ = n > 0 ? static_cast<uint32_t>(n) : 1;
  for (uint32_t cpu = 0; cpu < cpu_count_; ++cpu) {
    tracefs_cpu* r =
        tracefs_cpu_open(instance_->handle(), static_cast<int>(cpu), /*nonblock=*/true);
    if (!r) continue;  // an offline CPU has no buffer
    int size = tracefs_cpu_read_size(r);
    if (size <= 0 || (page_size_ != 0 && static_cast<uint32_t>(size) != page_size_)) {
      tracefs_cpu_close(r);
      return Status::IoError("tracefs: unexpected sub-buffer size");
    }
    page_size_ = static_cast<uint32_t>(size);
    cpus_.push_back({cpu, r, 0, 0});
  }
  if (cpus_.empty()) return Status::IoError("tracefs: no per-CPU buffer could be opened");
  formats_.page_size = page_size_;
  formats_.cpus = cpu_count_;
  return Status::Ok();
}

uint64_t KernelCapture::now_ticks() const {
  if (options_.clock == file::KernelClock::kTsc) return __rdtsc();
  return sys::monotonic_ns();
}

KernelCapture::~KernelCapture() {
  for (Cpu& c : cpus_) tracefs_cpu_close(c.reader);  // an open reader keeps the instance busy
}

Status KernelCapture::apply_filters() {
  tracefs_instance* in = instance_->handle();
  for (const EventSpec& e : events_) {
    if (e.filter == PidFilter::kNone) continue;
    std::string f = pid_filter(e, tids_);
    // "0" clears a filter: a process whose threads are too many to list is not filtered.
    errno = 0;
    if (tracefs_event_file_write(in, e.system.c_str(), e.event.c_str(), "filter",
                                 f.empty() ? "0" : f.c_str()) < 0) {
      return Status::FromErrno("tracefs: filter of " + e.system + ":" + e.event,
                               errno ? errno : EIO);
    }
  }
  return Status::Ok();
}

Status KernelCapture::refresh_threads() {
  if (stopped_) return Status::Ok();
  // A process that is gone is followed no more (its pid may be reused by another).
  pids_.erase(std::remove_if(pids_.begin(), pids_.end(),
                             [](uint32_t pid) {
                               return ::access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0;
                             }),
              pids_.end());
  std::vector<uint32_t> now = threads_of(pids_);
  if (now.empty() || now == tids_) return Status::Ok();
  tids_ = std::move(now);
  return apply_filters();
}

void KernelCapture::follow(uint32_t pid) {
  if (std::find(pids_.begin(), pids_.end(), pid) == pids_.end()) pids_.push_back(pid);
}

Status KernelCapture::drain(const PageSink& sink, bool final) {
  const double now = sys::monotonic_seconds();
  if (!final && now - last_drain_ < 0.01) return Status::Ok();
  last_drain_ = now;
  if (final && !stopped_) {
    tracefs_trace_off(instance_->handle());
    stopped_ = true;
  }
  for (Cpu& c : cpus_) {
    for (;;) {
      size_t pages = 0;
      while (pages < kPagesPerChunk) {
        uint8_t* at = buf_.data() + pages * page_size_;
        int n = final ? tracefs_cpu_flush(c.reader, at) : tracefs_cpu_read(c.reader, at, true);
        if (n < 0) {
          return Status::FromErrno("reading the kernel buffer of CPU " + std::to_string(c.cpu),
                                   errno ? errno : EIO);
        }
        if (n == 0) break;
        // A partly filled sub-buffer: its header says how much is valid.
        if (static_cast<uint32_t>(n) < page_size_) std::memset(at + n, 0, page_size_ - n);
        ++pages;
      }
      if (pages == 0) break;
      const size_t bytes = pages * page_size_;
      if (Status s = sink(c.cpu, c.position, buf_.data(), bytes); !s.ok()) return s;
      c.position += bytes;
      c.pages += pages;
      if (pages < kPagesPerChunk) break;
    }
  }
  return Status::Ok();
}

namespace {

uint64_t page_time(const uint8_t* page) {
  uint64_t t;
  std::memcpy(&t, page, sizeof(t));
  return t;
}

}  // namespace

void KernelCapture::trim_history(std::deque<Cpu::Read>* history, size_t cap) {
  size_t total = 0;
  for (const auto& r : *history) total += r.pages.size();
  while (total > cap) {
    auto& oldest = history->front();
    const size_t cut = std::min(total - cap, oldest.pages.size());
    oldest.pages.erase(oldest.pages.begin(), oldest.pages.begin() + static_cast<ptrdiff_t>(cut));
    total -= cut;
    oldest.gap = true;
    if (oldest.pages.empty()) history->pop_front();
  }
}

Status KernelCapture::flush_into(const Cpu& c, size_t limit, std::vector<uint8_t>* pages) const {
  while (pages->size() < limit) {
    const size_t at = pages->size();
    pages->resize(at + page_size_);
    errno = 0;
    int n = tracefs_cpu_flush(c.reader, pages->data() + at);
    if (n < 0 && errno == EAGAIN) n = 0;
    if (n < 0) {
      return Status::FromErrno("reading the kernel buffer of CPU " + std::to_string(c.cpu),
                               errno ? errno : EIO);
    }
    if (n <= 0) {
      pages->resize(at);
      break;
    }
    if (static_cast<uint32_t>(n) < page_size_) {
      std::memset(pages->data() + at + n, 0, page_size_ - n);
    }
  }
  return Status::Ok();
}

std::vector<uint8_t> KernelCapture::window_of(const Cpu& c, uint64_t since_ticks,
                                              uint64_t* complete_from) const {
  size_t total = 0;
  for (const Cpu::Read& r : c.history) total += r.pages.size();
  std::vector<uint8_t> pages;
  pages.reserve(total);
  size_t last_gap = SIZE_MAX;
  for (const Cpu::Read& r : c.history) {
    if (r.gap) last_gap = pages.size();
    pages.insert(pages.end(), r.pages.begin(), r.pages.end());
  }
  size_t first = 0;
  for (size_t at = page_size_; at < pages.size(); at += page_size_) {
    if (page_time(&pages[at]) <= since_ticks) first = at;
  }
  if (first > 0) last_gap = last_gap == SIZE_MAX ? first : std::max(last_gap, first);
  if (last_gap != SIZE_MAX && last_gap < pages.size()) {
    *complete_from = std::max(*complete_from, page_time(&pages[last_gap]));
  }
  pages.erase(pages.begin(), pages.begin() + static_cast<ptrdiff_t>(first));
  return pages;
}

Result<KernelWindow> KernelCapture::read_window(uint64_t since_ticks) {
  KernelWindow w;
  w.meta = formats_;
  uint64_t complete_from = formats_.start_ticks;
  const size_t cap = static_cast<size_t>(options_.buffer_kb) * 1024 / page_size_ * page_size_;
  for (Cpu& c : cpus_) {
    // What the buffer holds, and a few sub-buffers that fill while it is read.
    Cpu::Read fresh;
    if (Status s = flush_into(c, cap + 4 * page_size_, &fresh.pages); !s.ok()) return s;
    std::string stats = instance_->read("per_cpu/cpu" + std::to_string(c.cpu) + "/stats");
    const uint64_t overrun = stat_value(stats, "overrun:");
    const uint64_t dropped = stat_value(stats, "dropped events:");
    fresh.gap = overrun > c.overrun_seen || dropped > c.dropped_seen;
    c.overrun_seen = overrun;
    c.dropped_seen = dropped;
    if (fresh.pages.empty()) {
      c.gap_pending = c.gap_pending || fresh.gap;  // before the sub-buffers read next
    } else {
      fresh.gap = fresh.gap || c.gap_pending;
      c.gap_pending = false;
      c.history.push_back(std::move(fresh));
    }
    trim_history(&c.history, cap);
    std::vector<uint8_t> pages = window_of(c, since_ticks, &complete_from);
    const uint64_t kept = pages.size() / page_size_;
    // Losses as a recording counts them: everything ftrace overwrote or dropped since the
    // capture began (a snapshot of user-space rings counts what they overwrote the same way).
    w.meta.losses.push_back({c.cpu, overrun, dropped, kept});
    w.pages += kept;
    w.lost += overrun + dropped;
    if (kept > 0) w.cpus.emplace_back(c.cpu, std::move(pages));
  }
  w.meta.start_ticks = complete_from;
  return w;
}

void KernelCapture::read_losses(file::KernelMeta* meta) const {
  for (const Cpu& c : cpus_) {
    std::string stats = instance_->read("per_cpu/cpu" + std::to_string(c.cpu) + "/stats");
    meta->losses.push_back(
        {c.cpu, stat_value(stats, "overrun:"), stat_value(stats, "dropped events:"), c.pages});
  }
}

file::KernelMeta KernelCapture::meta() const {
  file::KernelMeta m = formats_;
  read_losses(&m);
  return m;
}

uint64_t KernelCapture::pages() const {
  uint64_t n = 0;
  for (const Cpu& c : cpus_) n += c.pages;
  return n;
}

}  // namespace nanotrace::kernel
