// Opening a trace file: check the file header, then walk the chunks, checking each header
// (checksum, size, order) before indexing it, and the payloads of the small chunks it
// decodes. The first invalid chunk ends the walk: a torn tail (recorder killed, disk full) or
// damage leaves the valid prefix, with a warning. DATA payloads are checked when they are
// read (read_extent). Nothing in the file is used before it has been checked.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>

#include "base/kernel_meta.hpp"
#include "base/node_meta.hpp"
#include "base/read_at.hpp"
#include "reader/segment_checks.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace::reader {
namespace {

Status pread_all(int fd, void* dst, uint64_t n, uint64_t off, const std::string& path) {
  if (sys::read_at(fd, dst, n, off) == n) return Status::Ok();
  if (errno != 0) return Status::FromErrno("reading " + path, errno);
  return Status::Corrupt(path + ": unexpected end of file");
}

uint64_t key(uint32_t slot, uint32_t generation) { return uint64_t{slot} << 32 | generation; }

// A NODE chunk: checked, and kept by node index (a later one of the same node replaces it).
// Its content is the file's structure (which processes are whose, how their clocks map), so
// one that passes its checksum but does not check out rejects the file.
Status index_node_chunk(const std::vector<uint8_t>& raw,
                        std::map<uint32_t, file::NodePayload>* nodes) {
  auto n = file::decode_node(raw.data(), raw.size());
  if (!n.ok()) return n.status();
  (*nodes)[n->node] = *n;
  return Status::Ok();
}

// The nodes of the file, numbered 0, 1, 2, ... with increasing first processes (node 0's the
// first process), and which node each process belongs to.
Status assign_nodes(std::map<uint32_t, file::NodePayload>& nodes, TraceFile* f) {
  if (nodes.empty()) return Status::Ok();
  if (nodes.size() > f->processes.size()) {
    return Status::Corrupt(std::to_string(nodes.size()) + " nodes for " +
                           std::to_string(f->processes.size()) + " processes");
  }
  for (auto& [index, node] : nodes) {
    if (index != f->nodes.size()) {
      return Status::Corrupt("node " + std::to_string(index) + " without node " +
                             std::to_string(f->nodes.size()));
    }
    if (f->nodes.empty() ? node.first_process != 0
                         : node.first_process <= f->nodes.back().first_process) {
      return Status::Corrupt("node " + std::to_string(index) + " has a bad first process");
    }
    f->nodes.push_back(node);
  }
  f->process_node.assign(f->processes.size(), 0);
  std::vector<uint32_t> count(f->nodes.size(), 0);
  std::map<uint32_t, size_t> position;  // process index -> position in f->processes
  uint32_t n = 0;                       // processes come by increasing index, as nodes do
  for (size_t i = 0; i < f->processes.size(); ++i) {
    position[f->processes[i].index] = i;
    while (n + 1 < f->nodes.size() && f->nodes[n + 1].first_process <= f->processes[i].index) ++n;
    f->process_node[i] = n;
    ++count[n];
  }
  for (n = 0; n < f->nodes.size(); ++n) {
    const file::NodePayload& node = f->nodes[n];
    if (count[n] == 0) return Status::Corrupt("node " + std::to_string(n) + " has no process");
    // The origin is one of the node's own processes.
    if (node.origin_present) {
      auto it = position.find(node.origin_process);
      if (it == position.end() || f->process_node[it->second] != n) {
        return Status::Corrupt("node " + std::to_string(n) +
                               "'s trigger origin is not its process");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

TraceFile::~TraceFile() {
  if (fd >= 0) ::close(fd);
}

bool TraceFile::has_magic(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO never blocks
  if (fd < 0) return false;
  char m[8] = {};
  bool yes = ::pread(fd, m, 8, 0) == 8 && std::memcmp(m, file::kFileMagic, 8) == 0;
  ::close(fd);
  return yes;
}

Status TraceFile::read_extent(const Extent& e, ChunkBuffer* raw, ChunkBuffer* scratch) const {
  bool packed = e.flags & file::kChunkZstd;
  ChunkBuffer* stored = packed ? scratch : raw;
  stored->resize(e.stored);
  Status s = pread_all(fd, stored->data(), e.stored, e.offset, path);
  if (!s.ok()) return s;
  if (file::crc32c(0, stored->data(), e.stored) != e.crc) {
    return Status::Corrupt(path + ": data chunk at offset " + std::to_string(e.offset) +
                           " fails its checksum");
  }
  if (packed) {
    raw->resize(e.raw);
    size_t n = ZSTD_decompress(raw->data(), e.raw, stored->data(), e.stored);
    if (ZSTD_isError(n) || n != e.raw) {
      return Status::Corrupt(path + ": chunk at offset " + std::to_string(e.offset) +
                             " does not decompress");
    }
  }
  return Status::Ok();
}

namespace {

// Why the chunk walk stops at a chunk, for TraceFile::warning; null: the chunk is valid.
using StopReason = const char*;

// Opens path for reading; it must be a regular file. Errors: kNotFound, kIoError, kInvalid.
Status open_regular_file(TraceFile* f) {
  f->fd = ::open(f->path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // fstat refuses a FIFO
  if (f->fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no such file: " + f->path);
    return Status::FromErrno(f->path, errno);
  }
  struct stat st;
  if (fstat(f->fd, &st) != 0) return Status::FromErrno(f->path, errno);
  if (!S_ISREG(st.st_mode)) return Status::Invalid(f->path + " is not a regular file");
  f->size = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

// Reads and checks the file header: magic, a version this build reads, size and checksum.
Status read_file_header(TraceFile* f) {
  const std::string& path = f->path;
  if (f->size < sizeof(file::FileHeader)) {
    return Status::Corrupt(path + ": truncated trace file (" + std::to_string(f->size) + " bytes)");
  }
  file::FileHeader& h = f->header;
  Status s = pread_all(f->fd, &h, sizeof(h), 0, path);
  if (!s.ok()) return s;
  if (std::memcmp(h.magic, file::kFileMagic, 8) != 0) {
    return Status::Corrupt(path + ": not a nanotrace trace file (bad magic)");
  }
  if (h.version < file::kMinFileVersion || h.version > file::kFileVersion) {
    return Status::Unsupported(path + ": trace file version " + std::to_string(h.version) +
                               " (this build reads versions " +
                               std::to_string(file::kMinFileVersion) + " to " +
                               std::to_string(file::kFileVersion) + ")");
  }
  if (h.header_size != sizeof(h) ||
      file::crc32c(0, &h, offsetof(file::FileHeader, header_crc)) != h.header_crc) {
    return Status::Corrupt(path + ": damaged file header");
  }
  return Status::Ok();
}

// Walks a trace file's chunks after its file header and indexes them into the TraceFile:
// DATA and KERNEL_DATA by where their payloads are, the small chunks (META, THREAD, LOSS,
// KERNEL_META, NODE, END) decoded, one function per chunk type. The first invalid chunk ends the
// walk with TraceFile::warning saying why.
class ChunkIndexer {
 public:
  explicit ChunkIndexer(TraceFile* f) : f_(*f) {}

  // Indexes every chunk up to the end of the file or the first invalid one. Errors: kIoError.
  Status index_chunks();
  // Hands the processes found to the file and links each stream to its process.
  void link_processes();
  // Hands the nodes found to the file (after link_processes): errors: kCorrupt.
  Status link_nodes() { return assign_nodes(nodes_, &f_); }

 private:
  // Reads the header of the chunk at off_ into c and checks it against the file.
  Result<StopReason> read_chunk_header(file::ChunkHeader* c);
  // Checks the chunk's payload (if it is read now) and indexes or decodes it.
  Result<StopReason> index_chunk(const file::ChunkHeader& c, uint64_t payload_off);
  // DATA: indexed only; its payload is checked when it is read (read_extent).
  StopReason index_data(const file::ChunkHeader& c, uint64_t payload_off);
  // KERNEL_DATA: indexed only; one that does not fit the KERNEL_META is left out.
  void index_kernel_data(const file::ChunkHeader& c, uint64_t payload_off);
  // Reads a small chunk's payload into raw_, checked and decompressed.
  Result<StopReason> read_small_payload(const file::ChunkHeader& c, uint64_t payload_off);
  // The small chunks' decoders: each takes raw_; false if the payload is malformed.
  bool decode_meta(const file::ChunkHeader& c);
  bool decode_thread(const file::ChunkHeader& c);
  bool decode_loss(const file::ChunkHeader& c);
  // A bad one leaves that node's kernel events out, never stops the walk.
  void decode_kernel_meta(const file::ChunkHeader& c);
  // The node a kernel chunk's slot names (version 4), and its CPU.
  uint32_t kernel_node_of(uint32_t slot) const {
    return f_.header.version >= file::kNodeKernelFileVersion ? slot >> 16 : 0;
  }
  uint32_t kernel_cpu_of(uint32_t slot) const {
    return f_.header.version >= file::kNodeKernelFileVersion ? slot & 0xffff : slot;
  }
  KernelNode* kernel_node(uint32_t node);
  bool decode_end();
  // Sets the warning for a walk that stops at the chunk at off_.
  void stop(StopReason why);

  TraceFile& f_;
  uint64_t off_ = sizeof(file::FileHeader);           // of the chunk being indexed
  std::map<uint64_t, uint32_t> by_key_;               // (slot, generation) -> stream index
  std::map<uint32_t, TraceFile::Process> processes_;  // by process index (slot >> 16)
  std::vector<uint8_t> stored_, raw_;                 // a small chunk's payload
  std::map<uint32_t, file::NodePayload> nodes_;       // NODE chunks by node index
};

Status ChunkIndexer::index_chunks() {
  while (off_ < f_.size) {
    if (f_.has_end) {
      stop("data after the END chunk");
      break;
    }
    file::ChunkHeader c;
    Result<StopReason> why = read_chunk_header(&c);
    if (!why.ok()) return why.status();
    uint64_t payload_off = off_ + sizeof(c);
    if (*why == nullptr) why = index_chunk(c, payload_off);
    if (!why.ok()) return why.status();
    if (*why != nullptr) {
      stop(*why);
      break;
    }
    ++f_.chunks;
    off_ = payload_off + c.stored_size;
  }
  return Status::Ok();
}

void ChunkIndexer::stop(StopReason why) {
  f_.warning = f_.path + ": " + why + " at offset " + std::to_string(off_) + "; using the " +
               std::to_string(f_.chunks) + " valid chunks before it";
}

Result<StopReason> ChunkIndexer::read_chunk_header(file::ChunkHeader* c) {
  if (f_.size - off_ < sizeof(*c)) return "incomplete chunk header (file cut short)";
  Status s = pread_all(f_.fd, c, sizeof(*c), off_, f_.path);
  if (!s.ok()) return s;
  if (c->magic != file::kChunkMagic ||
      file::crc32c(0, c, offsetof(file::ChunkHeader, header_crc)) != c->header_crc) {
    return "damaged chunk header";
  }
  bool packed = c->flags & file::kChunkZstd;
  if (c->type < 1 || c->type > file::max_chunk_type(f_.header.version) ||
      (c->flags & ~file::kChunkZstd) != 0 || c->stored_size > file::kMaxChunkBytes ||
      c->raw_size > file::kMaxChunkBytes || (!packed && c->stored_size != c->raw_size) ||
      c->index != f_.chunks) {
    return "malformed chunk header";
  }
  if (f_.size - (off_ + sizeof(*c)) < c->stored_size) return "incomplete chunk (file cut short)";
  return nullptr;
}

Result<StopReason> ChunkIndexer::index_chunk(const file::ChunkHeader& c, uint64_t payload_off) {
  auto type = static_cast<file::ChunkType>(c.type);
  if (type == file::ChunkType::kKernelData) {
    index_kernel_data(c, payload_off);
    return nullptr;
  }
  if (type == file::ChunkType::kData) return index_data(c, payload_off);
  Result<StopReason> why = read_small_payload(c, payload_off);
  if (!why.ok() || *why != nullptr) return why;
  bool ok = false;
  switch (type) {
    case file::ChunkType::kMeta:
      ok = decode_meta(c);
      break;
    case file::ChunkType::kThread:
      ok = decode_thread(c);
      break;
    case file::ChunkType::kLoss:
      ok = decode_loss(c);
      break;
    case file::ChunkType::kKernelMeta:
      decode_kernel_meta(c);
      ok = true;
      break;
    case file::ChunkType::kNode:
      if (Status node = index_node_chunk(raw_, &nodes_); !node.ok()) {
        return Status::Corrupt(f_.path + ": " + node.message() + " (chunk " +
                               std::to_string(f_.chunks) + ")");
      }
      ok = true;
      break;
    case file::ChunkType::kEnd:
      ok = decode_end();
      break;
    default:
      break;
  }
  return ok ? nullptr : "malformed chunk payload";
}

StopReason ChunkIndexer::index_data(const file::ChunkHeader& c, uint64_t payload_off) {
  auto it = by_key_.find(key(c.slot, c.generation));
  if (it == by_key_.end()) return "data chunk of an unknown thread";
  FileStream& fs = f_.streams[it->second];
  if (c.raw_size == 0 || c.position >= (uint64_t{1} << 62) || c.position < fs.end) {
    return "data chunk out of order";
  }
  fs.extents.push_back(
      Extent{payload_off, c.stored_size, c.raw_size, c.payload_crc, c.flags, c.position});
  fs.end = c.position + c.raw_size;
  return nullptr;
}

void ChunkIndexer::index_kernel_data(const file::ChunkHeader& c, uint64_t payload_off) {
  // Left out, the kernel events are incomplete; the user-space records are not affected.
  auto leave_out = [&](const std::string& why) {
    if (f_.kernel_warning.empty()) {
      f_.kernel_warning = "kernel data chunk at offset " + std::to_string(off_) + " " + why;
    }
  };
  const uint32_t node = kernel_node_of(c.slot), cpu = kernel_cpu_of(c.slot);
  const KernelNode* kn = kernel_node(node);
  if (kn == nullptr) {
    leave_out("before any valid kernel meta chunk of its node: ignored");
    return;
  }
  if (cpu >= kn->cpus || c.raw_size == 0 || c.raw_size % kn->page_size != 0) {
    leave_out("has a bad CPU or size: ignored");
    return;
  }
  KernelCpuExtents* k = nullptr;
  for (KernelCpuExtents& x : f_.kernel_data) {
    if (x.node == node && x.cpu == cpu) k = &x;
  }
  if (!k) {
    f_.kernel_data.push_back({node, cpu, {}, 0});
    k = &f_.kernel_data.back();
  }
  if (c.position < k->end || c.position >= (uint64_t{1} << 62)) {
    leave_out("is out of order: ignored");
    return;
  }
  k->extents.push_back(
      Extent{payload_off, c.stored_size, c.raw_size, c.payload_crc, c.flags, c.position});
  k->end = c.position + c.raw_size;
}

Result<StopReason> ChunkIndexer::read_small_payload(const file::ChunkHeader& c,
                                                    uint64_t payload_off) {
  stored_.resize(c.stored_size);
  Status s = pread_all(f_.fd, stored_.data(), c.stored_size, payload_off, f_.path);
  if (!s.ok()) return s;
  if (file::crc32c(0, stored_.data(), c.stored_size) != c.payload_crc) {
    return "chunk checksum mismatch";
  }
  if (!(c.flags & file::kChunkZstd)) {
    raw_.swap(stored_);
    return nullptr;
  }
  raw_.resize(c.raw_size);
  size_t n = ZSTD_decompress(raw_.data(), raw_.size(), stored_.data(), stored_.size());
  if (ZSTD_isError(n) || n != c.raw_size) return "chunk does not decompress";
  return nullptr;
}

bool ChunkIndexer::decode_meta(const file::ChunkHeader& c) {
  abi::SegmentHeader sh;
  if (raw_.size() < sizeof(sh)) return false;
  std::memcpy(&sh, raw_.data(), sizeof(sh));
  if (!validate_header(sh, raw_.size(), /*tables_only=*/true).ok() ||
      sh.block_size > file::kMaxBlockBytes) {
    return false;
  }
  TraceFile::Process& p = processes_[c.slot >> 16];
  p.index = c.slot >> 16;
  p.meta = raw_;
  return true;
}

bool ChunkIndexer::decode_thread(const file::ChunkHeader& c) {
  file::ThreadPayload t;
  if (raw_.size() != sizeof(t)) return false;
  std::memcpy(&t, raw_.data(), sizeof(t));
  // A thread belongs to a process whose tables came before it.
  if (t.first_pos >= (uint64_t{1} << 62) || by_key_.count(key(t.slot, t.generation)) ||
      t.slot != c.slot || !processes_.count(t.slot >> 16)) {
    return false;
  }
  by_key_[key(t.slot, t.generation)] = static_cast<uint32_t>(f_.streams.size());
  f_.streams.emplace_back();
  f_.streams.back().thread = t;
  return true;
}

bool ChunkIndexer::decode_loss(const file::ChunkHeader& c) {
  file::LossPayload lp;
  if (raw_.size() < sizeof(lp)) return false;
  std::memcpy(&lp, raw_.data(), sizeof(lp));
  if ((raw_.size() - sizeof(lp)) / sizeof(file::LossEntry) != lp.count ||
      (raw_.size() - sizeof(lp)) % sizeof(file::LossEntry) != 0) {
    return false;
  }
  if (auto p = processes_.find(c.slot >> 16); p != processes_.end()) {
    p->second.lost_no_slot = lp.lost_no_slot;
    p->second.lost_reclaimed = lp.lost_reclaimed;
  }
  for (uint32_t i = 0; i < lp.count; ++i) {
    file::LossEntry le;
    std::memcpy(&le, raw_.data() + sizeof(lp) + i * sizeof(le), sizeof(le));
    auto it = by_key_.find(key(le.slot, le.generation));
    if (it == by_key_.end()) continue;
    f_.streams[it->second].loss = le;
    f_.streams[it->second].has_loss = true;
  }
  return true;
}

KernelNode* ChunkIndexer::kernel_node(uint32_t node) {
  for (KernelNode& k : f_.kernel_nodes) {
    if (k.node == node) return &k;
  }
  return nullptr;
}

void ChunkIndexer::decode_kernel_meta(const file::ChunkHeader& c) {
  const uint32_t node = kernel_node_of(c.slot);
  auto km = file::decode_kernel_meta(raw_.data(), raw_.size());
  KernelNode* k = kernel_node(node);
  if (!km.ok()) {
    f_.kernel_warning = km.status().message() + " (chunk " + std::to_string(f_.chunks) +
                        "): kernel events ignored" +
                        (node == 0 ? "" : " (node " + std::to_string(node) + ")");
    // That node's kernel events go; the user-space data and other nodes' stay usable.
    std::erase_if(f_.kernel_data, [&](const KernelCpuExtents& x) { return x.node == node; });
    std::erase_if(f_.kernel_nodes, [&](const KernelNode& x) { return x.node == node; });
    return;
  }
  if (k != nullptr && (km->page_size != k->page_size || km->cpus != k->cpus)) {
    f_.kernel_warning = "kernel meta chunks disagree on the sub-buffer size or CPUs";
    return;
  }
  if (k == nullptr) {
    f_.kernel_nodes.push_back({node, {}, 0, 0});
    k = &f_.kernel_nodes.back();
  }
  k->page_size = km->page_size;
  k->cpus = km->cpus;
  k->meta = raw_;
}

bool ChunkIndexer::decode_end() {
  if (raw_.size() != sizeof(f_.end)) return false;
  std::memcpy(&f_.end, raw_.data(), sizeof(f_.end));
  f_.has_end = true;
  return true;
}

void ChunkIndexer::link_processes() {
  for (auto& [index, p] : processes_) f_.processes.push_back(std::move(p));
  if (!f_.processes.empty()) {
    f_.meta = f_.processes[0].meta;
    f_.lost_no_slot = f_.processes[0].lost_no_slot;
    f_.lost_reclaimed = f_.processes[0].lost_reclaimed;
  }
  for (FileStream& fs : f_.streams) {
    for (uint32_t i = 0; i < f_.processes.size(); ++i) {
      if (f_.processes[i].index == fs.thread.slot >> 16) fs.process = i;
    }
  }
}

}  // namespace

Result<std::shared_ptr<TraceFile>> TraceFile::open(const std::string& path) {
  auto f = std::make_shared<TraceFile>();
  f->path = path;
  Status s = open_regular_file(f.get());
  if (s.ok()) s = read_file_header(f.get());
  if (!s.ok()) return s;
  ChunkIndexer indexer(f.get());
  s = indexer.index_chunks();
  if (!s.ok()) return s;
  indexer.link_processes();
  if (f->meta.empty()) {
    return Status::Corrupt(path + ": no valid event tables (META chunk) in the file" +
                           (f->warning.empty() ? "" : " (" + f->warning + ")"));
  }
  if (Status n = indexer.link_nodes(); !n.ok()) {
    return Status::Corrupt(path + ": " + n.message());
  }
  if (!f->has_end && f->warning.empty()) {
    f->warning = path + ": no END chunk (recording still running, or the recorder was killed)";
  }
  return f;
}

}  // namespace nanotrace::reader
