// `nanotrace merge` (nanotrace/merge.hpp): one node's file after another into one file, each
// node's processes renumbered after the previous node's, and each node's kernel events kept
// under its node. Every input is checked whole before it
// is used (its index when it opens, each DATA payload's checksum as it is copied); payloads are
// copied in their stored form, so the ring bytes and their order are the inputs' own.
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "base/clock.hpp"
#include "base/output_file.hpp"
#include "base/read_at.hpp"
#include "nanotrace/merge.hpp"
#include "nanotrace/reader.hpp"
#include "reader/trace_file.hpp"
#include "record/file_writer.hpp"
#include "record/node_alignment.hpp"

namespace nanotrace {
namespace {

using reader::TraceFile;

struct Input {
  std::string path;
  std::shared_ptr<TraceFile> file;
  file::NodePayload node{};
  std::map<uint32_t, uint32_t> process_index;  // its process index -> the merged file's
  uint32_t index = 0;                          // its node index in the merged file
};

Result<Input> open_input(const std::string& path) {
  auto f = TraceFile::open(path);
  if (!f.ok()) return f.status();
  Input in;
  in.path = path;
  in.file = std::move(*f);
  const TraceFile& t = *in.file;
  if (!t.warning.empty()) return Status::Corrupt(t.warning);
  if (!t.kernel_warning.empty()) return Status::Corrupt(path + ": " + t.kernel_warning);
  if (t.nodes.empty()) {
    return Status::Unsupported(path +
                               ": no node description (a file written before version 3): "
                               "its clock cannot be aligned");
  }
  if (t.nodes.size() > 1) {
    return Status::Unsupported(path + ": already a merge of " + std::to_string(t.nodes.size()) +
                               " nodes; merge the nodes' own files");
  }
  in.node = t.nodes[0];
  return in;
}

// Reads one chunk's stored payload and checks it against its checksum.
Status read_payload(const Input& in, const file::ChunkHeader& c, uint64_t offset,
                    std::vector<uint8_t>* stored) {
  stored->resize(c.stored_size);
  if (sys::read_at(in.file->fd, stored->data(), c.stored_size, offset) != c.stored_size) {
    return Status::Corrupt(in.path + ": cannot read the chunk at offset " + std::to_string(offset));
  }
  if (file::crc32c(0, stored->data(), c.stored_size) != c.payload_crc) {
    return Status::Corrupt(in.path + ": chunk at offset " + std::to_string(offset) +
                           " fails its checksum");
  }
  return Status::Ok();
}

Status decompress(const Input& in, const file::ChunkHeader& c, std::vector<uint8_t>* payload) {
  if (!(c.flags & file::kChunkZstd)) return Status::Ok();
  std::vector<uint8_t> raw(c.raw_size);
  size_t n = ZSTD_decompress(raw.data(), raw.size(), payload->data(), payload->size());
  if (ZSTD_isError(n) || n != c.raw_size) {
    return Status::Corrupt(in.path + ": a chunk does not decompress");
  }
  payload->swap(raw);
  return Status::Ok();
}

uint32_t remap_slot(const Input& in, uint32_t slot) {
  auto it = in.process_index.find(slot >> 16);
  return (it == in.process_index.end() ? 0 : it->second) << 16 | (slot & 0xffff);
}

// Copies every chunk of one input but its NODE and END chunks, renumbering its processes.
Status copy_chunks(const Input& in, rec::FileWriter& out, MergedNode* node) {
  std::vector<uint8_t> payload;
  uint64_t off = sizeof(file::FileHeader);
  for (uint64_t i = 0; i < in.file->chunks; ++i) {
    file::ChunkHeader c;
    if (sys::read_at(in.file->fd, &c, sizeof(c), off) != sizeof(c)) {
      return Status::Corrupt(in.path + ": cannot read the chunk at offset " + std::to_string(off));
    }
    const uint64_t payload_off = off + sizeof(c);
    off = payload_off + c.stored_size;
    const auto type = static_cast<file::ChunkType>(c.type);
    if (type == file::ChunkType::kNode || type == file::ChunkType::kEnd) continue;
    if (Status s = read_payload(in, c, payload_off, &payload); !s.ok()) return s;
    Status s;
    if (type == file::ChunkType::kKernelMeta) {
      // Every node's kernel events, each under its node (version 4 slots): read on its own
      // node's clock, mapped onto the file's as its records are.
      s = out.write_stored_chunk(c, in.index << 16, payload.data());
    } else if (type == file::ChunkType::kKernelData) {
      s = out.write_stored_chunk(c, in.index << 16 | (c.slot & 0xffff), payload.data());
    } else if (type == file::ChunkType::kThread || type == file::ChunkType::kLoss) {
      // Their payloads name slots too: rewritten, stored uncompressed (they are small).
      if (s = decompress(in, c, &payload); !s.ok()) return s;
      if (type == file::ChunkType::kThread) {
        file::ThreadPayload t;
        std::memcpy(&t, payload.data(), sizeof(t));
        t.slot = remap_slot(in, t.slot);
        std::memcpy(payload.data(), &t, sizeof(t));
      } else {
        file::LossPayload lp;
        std::memcpy(&lp, payload.data(), sizeof(lp));
        for (uint32_t e = 0; e < lp.count; ++e) {
          file::LossEntry le;
          uint8_t* at = payload.data() + sizeof(lp) + e * sizeof(le);
          std::memcpy(&le, at, sizeof(le));
          le.slot = remap_slot(in, le.slot);
          std::memcpy(at, &le, sizeof(le));
        }
      }
      struct iovec v = {payload.data(), payload.size()};
      s = out.write_chunk(type, remap_slot(in, c.slot), c.generation, c.position, &v, 1);
    } else {
      s = out.write_stored_chunk(c, remap_slot(in, c.slot), payload.data());
      if (type == file::ChunkType::kData) node->data_bytes += c.raw_size;
    }
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

const char* alignment_text(uint32_t kind) {
  switch (static_cast<file::NodeAlignment>(kind)) {
    case file::NodeAlignment::kReference:
      return "reference";
    case file::NodeAlignment::kSharedClock:
      return "shared-clock";
    default:
      return "realtime";
  }
}

// The trigger that fired first on the merged timeline (wall time of the reference's clock).
void find_origin(const std::vector<Input>& inputs, MergeSummary* summary) {
  uint64_t best = ~0ull;
  for (uint32_t n = 0; n < inputs.size(); ++n) {
    const file::NodePayload& node = inputs[n].node;
    if (!node.origin_present) continue;
    const uint64_t ticks = file::align_ticks(node, node.origin_ticks);
    if (ticks >= best) continue;
    best = ticks;
    MergedOrigin& o = summary->origin;
    o.found = true;
    o.node = n;
    o.hostname = file::node_text(node.hostname, sizeof(node.hostname));
    o.pid = node.origin_pid;
    o.tid = node.origin_tid;
    o.seq = node.origin_seq;
    // Wall time through the reference's tightest pair.
    const file::NodeInstant ref = file::best_pair(inputs[0].node);
    const double apart =
        (static_cast<double>(ticks) - static_cast<double>(ref.ticks)) * 1e9 /
        static_cast<double>(std::max<uint64_t>(inputs[0].node.ticks_per_second, 1));
    o.realtime_ns = static_cast<uint64_t>(static_cast<double>(ref.realtime_ns) + apart);
  }
}

// The event name of each input's origin, from its process's tables.
void name_origin_event(const std::vector<std::string>& paths, MergeSummary* summary) {
  MergedOrigin& o = summary->origin;
  if (!o.found) return;
  auto trace = Trace::open(paths[o.node]);
  if (!trace.ok()) return;
  for (const NodeInfo& n : (*trace)->nodes()) {
    if (n.has_origin) o.event = n.origin_event;
  }
}

// The file's version: 4 if a node other than the first has kernel events (its kernel chunks
// name their node, which a version 3 reader would take for the first node's).
uint32_t merged_version(const std::vector<Input>& inputs) {
  for (size_t n = 1; n < inputs.size(); ++n) {
    if (!inputs[n].file->kernel_nodes.empty()) return file::kNodeKernelFileVersion;
  }
  return file::kWrittenFileVersion;
}

Status merge_into(std::vector<Input>& inputs, rec::FileWriter& out, MergeSummary* summary) {
  for (uint32_t n = 0; n < inputs.size(); ++n) {
    Input& in = inputs[n];
    auto a = rec::align_node(inputs[0].node, in.node, n == 0);
    if (!a.ok()) return Status(a.status().code(), in.path + ": " + a.status().message());
    if (!a->note.empty()) summary->notes.push_back(a->note);
    rec::apply_alignment(*a, &in.node);
    in.node.node = n;
    in.index = n;
    in.node.first_process = in.process_index.begin()->second;
    if (in.node.origin_present) {
      auto it = in.process_index.find(in.node.origin_process);
      in.node.origin_present = it != in.process_index.end();
      in.node.origin_process = in.node.origin_present ? it->second : 0;
    }
    MergedNode m;
    m.source = in.path;
    m.hostname = file::node_text(in.node.hostname, sizeof(in.node.hostname));
    m.processes = static_cast<uint32_t>(in.process_index.size());
    m.alignment = alignment_text(a->kind);
    m.error_bound_ns = a->error_bound_ns;
    m.pair_error_ns = a->pair_error_ns;
    m.sync_bound_ns = in.node.sync_bound_ns;
    m.sync_source = file::sync_source_name(static_cast<file::SyncSource>(in.node.sync_source));
    Status s = out.write_chunk(file::ChunkType::kNode, &in.node, sizeof(in.node));
    if (s.ok()) s = copy_chunks(in, out, &m);
    if (!s.ok()) return s;
    summary->data_bytes += m.data_bytes;
    if (in.file->has_end) summary->records += in.file->end.records;
    summary->nodes.push_back(std::move(m));
  }
  file::EndPayload e{};
  e.chunks = out.chunks();
  e.data_bytes = out.data_bytes();
  e.records = summary->records;
  e.reason = static_cast<uint32_t>(file::EndReason::kComplete);
  Status s = out.write_chunk(file::ChunkType::kEnd, &e, sizeof(e));
  return s.ok() ? out.close() : s;
}

}  // namespace

Result<MergeSummary> merge_traces(const std::vector<std::string>& inputs,
                                  const std::string& output) {
  const double t0 = sys::monotonic_seconds();
  if (inputs.empty()) return Status::Invalid("nothing to merge");
  if (inputs.size() > file::kMaxNodes) {
    return Status::Invalid("at most " + std::to_string(file::kMaxNodes) + " files in one merge");
  }
  MergeSummary summary;
  std::vector<Input> opened;
  uint32_t next_process = 0;
  for (const std::string& path : inputs) {
    auto in = open_input(path);
    if (!in.ok()) return in.status();
    if (Status same = check_not_source(output, in->file->fd); !same.ok()) return same;
    for (const TraceFile::Process& p : in->file->processes) {
      if (next_process > 0xffff) return Status::Invalid("more than 65536 processes in one file");
      in->process_index[p.index] = next_process++;
    }
    opened.push_back(std::move(*in));
  }
  rec::FileWriter out;
  const auto kind = static_cast<file::FileKind>(opened[0].file->header.kind);
  Status s = out.open(output, opened[0].file->header.pid, kind, /*compress=*/false, -1,
                      merged_version(opened));
  if (!s.ok()) return s;
  s = merge_into(opened, out, &summary);
  if (!s.ok()) {
    ::unlink(output.c_str());
    return s;
  }
  find_origin(opened, &summary);
  name_origin_event(inputs, &summary);
  summary.file_bytes = out.bytes_written();
  summary.seconds = sys::monotonic_seconds() - t0;
  return summary;
}

}  // namespace nanotrace
