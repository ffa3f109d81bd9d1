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
  for (size_t i = 0; i < f->processes.size(); ++i) {
    uint32_t n = 0;
    while (n + 1 < f->nodes.size() && f->nodes[n + 1].first_process <= f->processes[i].index) ++n;
    f->process_node[i] = n;
    ++count[n];
  }
  for (uint32_t n = 0; n < f->nodes.size(); ++n) {
    const file::NodePayload& node = f->nodes[n];
    if (count[n] == 0) return Status::Corrupt("node " + std::to_string(n) + " has no process");
    // The origin is one of the node's own processes.
    if (node.origin_present) {
      bool found = false;
      for (size_t i = 0; i < f->processes.size(); ++i) {
        found |= f->processes[i].index == node.origin_process && f->process_node[i] == n;
      }
      if (!found) {
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

Result<std::shared_ptr<TraceFile>> TraceFile::open(const std::string& path) {
  auto f = std::make_shared<TraceFile>();
  f->path = path;
  f->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // fstat refuses a FIFO
  if (f->fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no such file: " + path);
    return Status::FromErrno(path, errno);
  }
  struct stat st;
  if (fstat(f->fd, &st) != 0) return Status::FromErrno(path, errno);
  if (!S_ISREG(st.st_mode)) return Status::Invalid(path + " is not a regular file");
  f->size = static_cast<uint64_t>(st.st_size);
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

  std::map<uint64_t, uint32_t> by_key;               // (slot, generation) -> stream index
  std::map<uint32_t, TraceFile::Process> processes;  // by process index (slot >> 16)
  std::map<uint32_t, file::NodePayload> nodes;       // by node index
  std::vector<uint8_t> stored, raw;
  uint64_t off = sizeof(h);
  auto stop = [&](const std::string& why) {
    f->warning = path + ": " + why + " at offset " + std::to_string(off) + "; using the " +
                 std::to_string(f->chunks) + " valid chunks before it";
  };
  while (off < f->size) {
    if (f->has_end) {
      stop("data after the END chunk");
      break;
    }
    file::ChunkHeader c;
    if (f->size - off < sizeof(c)) {
      stop("incomplete chunk header (file cut short)");
      break;
    }
    s = pread_all(f->fd, &c, sizeof(c), off, path);
    if (!s.ok()) return s;
    if (c.magic != file::kChunkMagic ||
        file::crc32c(0, &c, offsetof(file::ChunkHeader, header_crc)) != c.header_crc) {
      stop("damaged chunk header");
      break;
    }
    bool packed = c.flags & file::kChunkZstd;
    if (c.type < 1 || c.type > file::max_chunk_type(h.version) ||
        (c.flags & ~file::kChunkZstd) != 0 || c.stored_size > file::kMaxChunkBytes ||
        c.raw_size > file::kMaxChunkBytes || (!packed && c.stored_size != c.raw_size) ||
        c.index != f->chunks) {
      stop("malformed chunk header");
      break;
    }
    uint64_t payload_off = off + sizeof(c);
    if (f->size - payload_off < c.stored_size) {
      stop("incomplete chunk (file cut short)");
      break;
    }
    auto type = static_cast<file::ChunkType>(c.type);
    if (type == file::ChunkType::kKernelData) {
      // Indexed only, like DATA; one that does not fit what KERNEL_META announced is left
      // out (the kernel events are incomplete; the user-space records are not affected).
      auto skip = [&](const std::string& why) {
        if (f->kernel_warning.empty()) {
          f->kernel_warning = "kernel data chunk at offset " + std::to_string(off) + " " + why;
        }
      };
      if (f->kernel_page_size == 0) {
        skip("before any valid kernel meta chunk: ignored");
      } else if (c.slot >= f->kernel_cpus || c.raw_size == 0 ||
                 c.raw_size % f->kernel_page_size != 0) {
        skip("has a bad CPU or size: ignored");
      } else {
        KernelCpuExtents* k = nullptr;
        for (KernelCpuExtents& x : f->kernel_data) {
          if (x.cpu == c.slot) k = &x;
        }
        if (!k) {
          f->kernel_data.push_back({c.slot, {}, 0});
          k = &f->kernel_data.back();
        }
        if (c.position < k->end || c.position >= (uint64_t{1} << 62)) {
          skip("is out of order: ignored");
        } else {
          k->extents.push_back(
              Extent{payload_off, c.stored_size, c.raw_size, c.payload_crc, c.flags, c.position});
          k->end = c.position + c.raw_size;
        }
      }
    } else if (type == file::ChunkType::kData) {
      // Indexed only: its payload is checked when it is read (read_extent), so that the
      // bulk of the file is read once.
      auto it = by_key.find(key(c.slot, c.generation));
      if (it == by_key.end()) {
        stop("data chunk of an unknown thread");
        break;
      }
      FileStream& fs = f->streams[it->second];
      if (c.raw_size == 0 || c.position >= (uint64_t{1} << 62) || c.position < fs.end) {
        stop("data chunk out of order");
        break;
      }
      fs.extents.push_back(
          Extent{payload_off, c.stored_size, c.raw_size, c.payload_crc, c.flags, c.position});
      fs.end = c.position + c.raw_size;
    } else {
      stored.resize(c.stored_size);
      s = pread_all(f->fd, stored.data(), c.stored_size, payload_off, path);
      if (!s.ok()) return s;
      if (file::crc32c(0, stored.data(), c.stored_size) != c.payload_crc) {
        stop("chunk checksum mismatch");
        break;
      }
      // Small chunks: decode now.
      if (packed) {
        raw.resize(c.raw_size);
        size_t n = ZSTD_decompress(raw.data(), raw.size(), stored.data(), stored.size());
        if (ZSTD_isError(n) || n != c.raw_size) {
          stop("chunk does not decompress");
          break;
        }
      } else {
        raw.swap(stored);
      }
      bool ok = true;
      switch (type) {
        case file::ChunkType::kMeta: {
          abi::SegmentHeader sh;
          if (raw.size() < sizeof(sh)) {
            ok = false;
            break;
          }
          std::memcpy(&sh, raw.data(), sizeof(sh));
          ok = validate_header(sh, raw.size(), /*tables_only=*/true).ok() &&
               sh.block_size <= file::kMaxBlockBytes;
          if (ok) {
            TraceFile::Process& p = processes[c.slot >> 16];
            p.index = c.slot >> 16;
            p.meta = raw;
          }
          break;
        }
        case file::ChunkType::kThread: {
          file::ThreadPayload t;
          if (raw.size() != sizeof(t)) {
            ok = false;
            break;
          }
          std::memcpy(&t, raw.data(), sizeof(t));
          // A thread belongs to a process whose tables came before it.
          if (t.first_pos >= (uint64_t{1} << 62) || by_key.count(key(t.slot, t.generation)) ||
              t.slot != c.slot || !processes.count(t.slot >> 16)) {
            ok = false;
            break;
          }
          by_key[key(t.slot, t.generation)] = static_cast<uint32_t>(f->streams.size());
          f->streams.emplace_back();
          f->streams.back().thread = t;
          break;
        }
        case file::ChunkType::kLoss: {
          file::LossPayload lp;
          if (raw.size() < sizeof(lp)) {
            ok = false;
            break;
          }
          std::memcpy(&lp, raw.data(), sizeof(lp));
          if ((raw.size() - sizeof(lp)) / sizeof(file::LossEntry) != lp.count ||
              (raw.size() - sizeof(lp)) % sizeof(file::LossEntry) != 0) {
            ok = false;
            break;
          }
          if (auto p = processes.find(c.slot >> 16); p != processes.end()) {
            p->second.lost_no_slot = lp.lost_no_slot;
            p->second.lost_reclaimed = lp.lost_reclaimed;
          }
          for (uint32_t i = 0; i < lp.count; ++i) {
            file::LossEntry le;
            std::memcpy(&le, raw.data() + sizeof(lp) + i * sizeof(le), sizeof(le));
            auto it = by_key.find(key(le.slot, le.generation));
            if (it == by_key.end()) continue;
            f->streams[it->second].loss = le;
            f->streams[it->second].has_loss = true;
          }
          break;
        }
        case file::ChunkType::kKernelMeta: {
          auto km = file::decode_kernel_meta(raw.data(), raw.size());
          if (!km.ok()) {
            f->kernel_warning = km.status().message() + " (chunk " + std::to_string(f->chunks) +
                                "): kernel events ignored";
            f->kernel_page_size = 0;
            f->kernel_data.clear();
            f->kernel_meta.clear();
            break;  // the user-space data stays usable
          }
          if (f->kernel_page_size != 0 &&
              (km->page_size != f->kernel_page_size || km->cpus != f->kernel_cpus)) {
            f->kernel_warning = "kernel meta chunks disagree on the sub-buffer size or CPUs";
            break;
          }
          f->kernel_page_size = km->page_size;
          f->kernel_cpus = km->cpus;
          f->kernel_meta = raw;
          break;
        }
        case file::ChunkType::kNode:
          if (Status node = index_node_chunk(raw, &nodes); !node.ok()) {
            return Status::Corrupt(path + ": " + node.message() + " (chunk " +
                                   std::to_string(f->chunks) + ")");
          }
          break;
        case file::ChunkType::kEnd:
          ok = raw.size() == sizeof(f->end);
          if (ok) {
            std::memcpy(&f->end, raw.data(), sizeof(f->end));
            f->has_end = true;
          }
          break;
        default:
          ok = false;
      }
      if (!ok) {
        stop("malformed chunk payload");
        break;
      }
    }
    ++f->chunks;
    off = payload_off + c.stored_size;
  }
  for (auto& [index, p] : processes) f->processes.push_back(std::move(p));
  if (!f->processes.empty()) {
    f->meta = f->processes[0].meta;
    f->lost_no_slot = f->processes[0].lost_no_slot;
    f->lost_reclaimed = f->processes[0].lost_reclaimed;
  }
  for (FileStream& fs : f->streams) {
    for (uint32_t i = 0; i < f->processes.size(); ++i) {
      if (f->processes[i].index == fs.thread.slot >> 16) fs.process = i;
    }
  }
  if (f->meta.empty()) {
    return Status::Corrupt(path + ": no valid event tables (META chunk) in the file" +
                           (f->warning.empty() ? "" : " (" + f->warning + ")"));
  }
  if (Status n = assign_nodes(nodes, f.get()); !n.ok()) {
    return Status::Corrupt(path + ": " + n.message());
  }
  if (!f->has_end && f->warning.empty()) {
    f->warning = path + ": no END chunk (recording still running, or the recorder was killed)";
  }
  return f;
}

}  // namespace nanotrace::reader
