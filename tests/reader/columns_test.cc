// read_columns and ColumnReader's batches against read_all on real traced processes: every
// row is the record read_all returns at the same position (time, thread, sequence number,
// event, every field value), for a live segment of interleaved threads, the export helper's
// every field type and strings, and a trace file of the same records; a selection keeps the
// others' order.
#include "nanotrace/columns.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/file_format.hpp"
#include "common/child_process.hpp"
#include "nanotrace/record.hpp"
#include "reader/column_split.hpp"

namespace nanotrace {
namespace {

const std::string kBin = NANOTRACE_BIN_DIR;

struct Row {
  uint64_t time_ns, seq;
  uint32_t thread;
  uint16_t event;
  std::vector<uint64_t> bits;
  std::vector<std::string> text;
  bool operator==(const Row&) const = default;
};

Row row_of(const Record& r) {
  Row row{r.time_ns, r.seq, r.thread, r.event->id, {}, {}};
  for (uint32_t i = 0; i < r.field_count; ++i) {
    bool s = r.values[i].type == abi::FieldType::kString;
    row.bits.push_back(s ? 0 : r.values[i].bits);
    row.text.emplace_back(s ? r.values[i].text : std::string_view());
  }
  return row;
}

// The rows of a ColumnSet in stream order.
std::vector<Row> rows_of(const ColumnSet& set) {
  std::vector<Row> out(set.rows);
  for (const EventTable& t : set.tables) {
    for (size_t i = 0; i < t.rows(); ++i) {
      EXPECT_LT(t.order[i], set.rows);
      Row& row = out[t.order[i]];
      row = {t.time_ns[i], t.seq[i], t.thread[i], t.ids.size() > 1 ? t.event[i] : t.ids[0], {}, {}};
      for (const FieldColumn& f : t.fields) {
        row.bits.push_back(f.is_string() ? 0 : f.bits[i]);
        row.text.emplace_back(f.is_string() ? f.string_at(i) : std::string_view());
      }
    }
  }
  return out;
}

// ticks: every record's clock value, selected or not.
std::vector<Row> read_rows(Trace& trace, const std::vector<std::string>& only = {},
                           uint64_t* lost = nullptr, std::vector<uint64_t>* ticks = nullptr) {
  std::vector<Row> out;
  auto source = trace.read_all();
  Record r;
  while (source->next(&r)) {
    bool keep = only.empty();
    for (const std::string& f : only)
      keep = keep || f == r.event->full_name() || f == r.event->group;
    if (keep) out.push_back(row_of(r));
    if (ticks != nullptr) ticks->push_back(r.ticks);
  }
  if (lost) {
    *lost = trace.process().lost_no_slot + trace.process().lost_reclaimed;
    for (const ThreadStats& s : source->threads()) *lost += s.lost();
  }
  return out;
}

// read_columns in two parts (column_split.hpp), cut at each of `cuts` and where the parts
// choose: the rows and statistics of a read in one part.
void expect_same_in_parts(Trace& trace, const std::vector<std::string>& only,
                          const std::vector<Row>& expected, uint64_t lost,
                          const std::vector<uint64_t>& cuts) {
  ColumnOptions options{only, true};
  options.parts = 1;
  auto whole = read_columns(trace, options);
  ASSERT_TRUE(whole.ok());
  std::vector<std::optional<uint64_t>> splits(cuts.begin(), cuts.end());
  splits.push_back(std::nullopt);
  for (const std::optional<uint64_t>& cut : splits) {
    SCOPED_TRACE(cut ? "cut at " + std::to_string(*cut) : "cut chosen while reading");
    auto set = ColumnSplitTesting::read_columns(trace, options, cut);
    ASSERT_TRUE(set.ok()) << set.status().message();
    EXPECT_EQ(set->lost, lost);
    EXPECT_EQ(set->corrupt_blocks, whole->corrupt_blocks);
    ASSERT_EQ(set->threads.size(), whole->threads.size());
    for (size_t i = 0; i < set->threads.size(); ++i) {
      EXPECT_EQ(set->threads[i].records, whole->threads[i].records) << i;
      EXPECT_EQ(set->threads[i].lost(), whole->threads[i].lost()) << i;
    }
    std::vector<Row> got = rows_of(*set);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "row " << i;
    // Codes in order of first appearance, as a read in one part gives them.
    for (size_t k = 0; k < set->tables.size(); ++k) {
      for (size_t j = 0; j < set->tables[k].fields.size(); ++j) {
        const FieldColumn& f = set->tables[k].fields[j];
        if (!f.is_string()) continue;
        const FieldColumn& w = whole->tables[k].fields[j];
        ASSERT_EQ(f.codes.size(), w.codes.size());
        EXPECT_TRUE(std::equal(f.codes.begin(), f.codes.end(), w.codes.begin()));
        EXPECT_EQ(f.dictionary->size(), w.dictionary->size());
      }
    }
    EXPECT_EQ(set->gaps.size(), whole->gaps.size());
    for (size_t i = 0; i < std::min(set->gaps.size(), whole->gaps.size()); ++i) {
      EXPECT_EQ(set->gaps[i].row, whole->gaps[i].row);
      EXPECT_EQ(set->gaps[i].records, whole->gaps[i].records);
    }
  }
}

void expect_same(Trace& trace, const std::vector<std::string>& only = {}) {
  uint64_t lost = 0;
  std::vector<uint64_t> ticks;
  std::vector<Row> expected = read_rows(trace, only, &lost, &ticks);
  // Cuts before every record, through the middle, at records a thread shares its clock value
  // with another's, and after the last.
  std::vector<uint64_t> cuts = {0};
  if (!ticks.empty()) {
    for (size_t q = 1; q < 8; ++q) cuts.push_back(ticks[ticks.size() * q / 8]);
    cuts.push_back(*std::max_element(ticks.begin(), ticks.end()) + 1);
  }
  expect_same_in_parts(trace, only, expected, lost, cuts);
  auto set = read_columns(trace, {only, true});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->rows, expected.size());
  EXPECT_EQ(set->lost, lost);
  EXPECT_EQ(set->threads.size(), trace.threads().size());
  std::vector<Row> got = rows_of(*set);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << "row " << i;
  }
  // The same rows in batches of 777 (the last one short), one ColumnSet reused.
  auto reader = ColumnReader::open(trace, {only, true});
  ASSERT_TRUE(reader.ok());
  ColumnSet batch;
  size_t at = 0;
  while ((*reader)->next(&batch, 777)) {
    ASSERT_LE(batch.rows, 777u);
    std::vector<Row> part(batch.rows);
    for (const EventTable& t : batch.tables) {
      for (size_t i = 0; i < t.rows(); ++i) {
        ASSERT_GE(t.order[i], at);
        ASSERT_LT(t.order[i] - at, batch.rows);
      }
    }
    for (const EventTable& t : batch.tables) {
      for (size_t i = 0; i < t.rows(); ++i) {
        Row& row = part[t.order[i] - at];
        row = {t.time_ns[i], t.seq[i], t.thread[i], t.ids.size() > 1 ? t.event[i] : t.ids[0],
               {},           {}};
        for (const FieldColumn& f : t.fields) {
          row.bits.push_back(f.is_string() ? 0 : f.bits[i]);
          row.text.emplace_back(f.is_string() ? f.string_at(i) : std::string_view());
        }
      }
    }
    for (const Row& row : part) ASSERT_EQ(row, expected[at++]) << "batched row " << at - 1;
  }
  EXPECT_EQ(at, expected.size());
  EXPECT_EQ(batch.rows, 0u);
  EXPECT_EQ(batch.lost, lost);
}

TEST(ColumnsTest, LiveThreadsInterleavedMatchReadAll) {
  testing::ChildProcess child(
      {kBin + "/nanotrace_test_producer", "--threads", "4", "--events", "20000", "--hold"}, {});
  pid_t pid = static_cast<pid_t>(std::stol(child.read_line().substr(4)));
  ASSERT_EQ(child.read_line(), "ready");
  auto trace = Trace::open(std::to_string(pid));
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  expect_same(**trace);
  auto set = read_columns(**trace);
  ASSERT_TRUE(set.ok());
  const EventTable* rec = set->find("test:rec");
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->rows(), 80000u);
  ASSERT_EQ(rec->fields.size(), 4u);
  EXPECT_EQ(rec->fields[2].info.name, "value");
  child.close_stdin();
  child.wait();
}

TEST(ColumnsTest, EveryFieldTypeAndStringsFromSegmentAndFile) {
  std::string segment = testing::run_keeping_segment(kBin + "/export_helper --pairs 300");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  expect_same(**trace);
  expect_same(**trace, {"test:begin"});
  expect_same(**trace, {"test:end", "test:strings"});

  auto set = read_columns(**trace, {{"test:types"}});
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->tables.size(), 1u);
  const EventTable& types = set->tables[0];
  ASSERT_EQ(types.rows(), 1u);
  EXPECT_EQ(types.fields[0].value_at(0).as_int(), -5);
  EXPECT_EQ(types.fields[9].value_at(0).as_double(), -2.25);
  EXPECT_EQ(types.fields[11].string_at(0), "hello world");
  EXPECT_EQ(read_columns(**trace, {{"test:nosuch"}}).status().code(), StatusCode::kNotFound);

  // The same records from a trace file.
  std::string file = ::testing::TempDir() + "columns-" + std::to_string(getpid()) + ".ntr";
  auto summary = write_snapshot(**trace, file, true);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  auto from_file = Trace::open(file);
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  expect_same(**from_file);
  expect_same(**from_file, {"test"});
  std::filesystem::remove(file);
  std::filesystem::remove(segment);
}

TEST(ColumnsTest, SelectedFieldsHoldTheValuesOfAFullRead) {
  std::string segment = testing::run_keeping_segment(kBin + "/export_helper --pairs 300");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok());
  auto all = read_columns(**trace);
  ASSERT_TRUE(all.ok());
  // Strings before, between and after the fields read (their lengths move what follows).
  ColumnOptions options;
  options.fields = {"second", "small", "id", "i64", "dev"};
  auto some = read_columns(**trace, options);
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->tables.size(), all->tables.size());
  EXPECT_EQ(some->rows, all->rows);
  size_t compared = 0;
  for (size_t k = 0; k < all->tables.size(); ++k) {
    const EventTable &a = all->tables[k], &s = some->tables[k];
    ASSERT_EQ(s.rows(), a.rows()) << a.name;
    EXPECT_EQ(std::vector<uint64_t>(s.time_ns.begin(), s.time_ns.end()),
              std::vector<uint64_t>(a.time_ns.begin(), a.time_ns.end()));
    size_t next = 0;  // the selected columns keep the event's field order
    for (const FieldColumn& f : a.fields) {
      bool wanted = false;
      for (const std::string& name : options.fields) wanted = wanted || name == f.info.name;
      if (!wanted) continue;
      ASSERT_LT(next, s.fields.size()) << a.name;
      const FieldColumn& g = s.fields[next++];
      ASSERT_EQ(g.info.name, f.info.name);
      for (size_t i = 0; i < a.rows(); ++i) {
        if (f.is_string()) {
          ASSERT_EQ(g.string_at(i), f.string_at(i)) << a.name << " " << f.info.name << " " << i;
        } else {
          ASSERT_EQ(g.bits[i], f.bits[i]) << a.name << " " << f.info.name << " " << i;
        }
        ++compared;
      }
    }
    EXPECT_EQ(next, s.fields.size()) << a.name;
  }
  EXPECT_GT(compared, 600u);
  std::filesystem::remove(segment);
}

// Strings are codes into one dictionary per field name: the same for every table with that
// field and every batch of a reader, each distinct string once; past its bound a dictionary
// starts again as a new one, and the batches before keep theirs.
TEST(ColumnsTest, StringDictionariesSharedByFieldNameAndKeptAcrossBatches) {
  std::string segment = testing::run_keeping_segment(kBin + "/export_helper --pairs 300");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok());
  auto all = read_columns(**trace, {{"test"}, true});
  ASSERT_TRUE(all.ok());
  const std::vector<Row> expected = rows_of(*all);
  for (size_t bound : {size_t{0}, size_t{2}}) {
    ColumnOptions options{{"test"}, true};
    options.max_dictionary_entries = bound;
    auto reader = ColumnReader::open(**trace, options);
    ASSERT_TRUE(reader.ok());
    ColumnSet batch;
    std::vector<std::shared_ptr<const StringDictionary>> kept;  // every batch's, alive
    std::set<const StringDictionary*> dev_dictionaries;
    size_t at = 0;
    while ((*reader)->next(&batch, 50)) {
      ASSERT_NE(batch.event_names, nullptr);
      for (const EventTable& t : batch.tables) {
        EXPECT_EQ((*batch.event_names)[t.name_code], t.name);
        for (const FieldColumn& f : t.fields) {
          if (!f.is_string()) continue;
          ASSERT_NE(f.dictionary, nullptr);
          kept.push_back(f.dictionary);
          if (f.info.name == "dev") dev_dictionaries.insert(f.dictionary.get());
          std::set<std::string_view> distinct;
          for (uint32_t c = 0; c < f.dictionary->size(); ++c) distinct.insert((*f.dictionary)[c]);
          EXPECT_EQ(distinct.size(), f.dictionary->size()) << "an entry twice";
          for (size_t i = 0; i < t.rows(); ++i) ASSERT_LT(f.codes[i], f.dictionary->size());
        }
      }
      // Every row against the full read's, strings included.
      for (const EventTable& t : batch.tables) {
        for (size_t i = 0; i < t.rows(); ++i) {
          ASSERT_LT(t.order[i], expected.size());
          const Row& want = expected[t.order[i]];
          ASSERT_EQ(t.time_ns[i], want.time_ns);
          ASSERT_EQ(t.seq[i], want.seq);
          for (size_t j = 0; j < t.fields.size(); ++j) {
            const FieldColumn& f = t.fields[j];
            if (f.is_string()) {
              ASSERT_EQ(f.string_at(i), want.text[j]);
            } else {
              ASSERT_EQ(f.bits[i], want.bits[j]);
            }
          }
        }
      }
      at += batch.rows;
    }
    EXPECT_EQ(at, expected.size());
    if (bound == 0) {
      // test:begin's dev: sda, sdb, nvme0n1, in one dictionary for the whole read.
      ASSERT_EQ(dev_dictionaries.size(), 1u);
      EXPECT_EQ((*dev_dictionaries.begin())->size(), 3u);
    } else {
      EXPECT_GT(dev_dictionaries.size(), 1u);  // started again past 2 entries
      for (const StringDictionary* d : dev_dictionaries) EXPECT_LE(d->size(), 3u);
    }
  }
  std::filesystem::remove(segment);
}

// Every text gets one code, kept as the index grows: short texts (their own key) that share
// bytes, sizes or a key word ("a", "aa" and "aaa" load as one word), texts with NUL bytes, texts
// that differ in one middle byte, and long ones that differ only at their end.
TEST(ColumnsTest, DictionaryCodesEachDistinctTextOnce) {
  std::vector<std::string> texts;
  const char alphabet[] = {'a', 'b', '\0'};
  std::vector<std::string> level{""};
  for (int size = 0; size <= 5; ++size) {
    texts.insert(texts.end(), level.begin(), level.end());
    std::vector<std::string> longer;
    for (const std::string& t : level) {
      for (char c : alphabet) longer.push_back(t + c);
    }
    level.swap(longer);
  }
  // A byte repeated 1 to 3 times, or 4 to 8 times, loads as one word: only the sizes differ.
  for (int c = 1; c < 256; ++c) {
    for (size_t size = 1; size <= 8; ++size)
      texts.push_back(std::string(size, static_cast<char>(c)));
  }
  for (size_t size = 6; size <= 40; ++size) {
    std::string base(size, 'x');
    texts.push_back(base);
    for (size_t at : {size / 2, size - 1}) {
      std::string other = base;
      other[at] = 'y';
      texts.push_back(other);
    }
  }
  std::set<std::string> seen;
  std::erase_if(texts, [&](const std::string& t) { return !seen.insert(t).second; });
  StringDictionary d;
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_EQ(d.code_of(texts[i]), i) << "text #" << i << " coded as an earlier one";
  }
  ASSERT_EQ(d.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(d.code_of(texts[i]), i) << "text #" << i << " coded again";
    EXPECT_EQ(d[static_cast<uint32_t>(i)], texts[i]);
  }
  EXPECT_EQ(d.size(), texts.size());
}

TEST(ColumnsTest, AnEventWithoutFields) {
  std::string segment = testing::run_keeping_segment(kBin + "/export_helper --pairs 8");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok());
  auto set = read_columns(**trace, {{"test:empty"}});
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->tables.size(), 1u);
  EXPECT_EQ(set->tables[0].rows(), 1u);
  EXPECT_TRUE(set->tables[0].fields.empty());
  std::filesystem::remove(segment);
}

// Damages records of a trace file's blocks as a hostile writer would, keeping every checksum
// valid (so that the records themselves are what the reader must check): per damaged block,
// one of an unknown event id, a string length past the limit, a string length that runs into
// the records after it, an early end marker and a clock value out of order. Returns the
// number of blocks damaged.
int damage_records(const std::string& path, const Trace& trace) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  const uint64_t block = trace.process().block_size;
  int damaged = 0;
  for (size_t off = sizeof(file::FileHeader); off + sizeof(file::ChunkHeader) <= bytes.size();) {
    file::ChunkHeader c;
    std::memcpy(&c, bytes.data() + off, sizeof(c));
    uint8_t* payload = bytes.data() + off + sizeof(c);
    if (c.type == static_cast<uint16_t>(file::ChunkType::kData) && c.flags == 0) {
      for (uint64_t at = 0; at + block <= c.raw_size; ++at) {
        if ((c.position + at) % block != 0) continue;
        // The block's records, as the event table sizes them.
        std::vector<uint32_t> starts, strings;  // record offsets; offsets of length bytes
        for (uint32_t r = abi::kBlockHeaderBytes; r + 8 <= block;) {
          uint64_t word0;
          std::memcpy(&word0, payload + at + r, 8);
          const EventInfo* e = word0 == 0 ? nullptr : trace.event_by_id(word0 & 0xffff);
          if (e == nullptr) break;
          starts.push_back(r);
          uint32_t next = r + 8;
          for (const FieldInfo& f : e->fields) {
            if (f.type == abi::FieldType::kString) {
              if (starts.size() > 1) strings.push_back(next);
              next += abi::string_slot_bytes(payload[at + next]);
            } else {
              next += 8;
            }
          }
          r = next;
        }
        if (starts.size() < 4 || strings.empty()) continue;
        uint8_t* b = payload + at;
        switch (damaged++ % 5) {
          case 0:  // an event id the table does not have
            b[starts[2]] = 0xf0;
            b[starts[2] + 1] = 0x7f;
            break;
          case 1:  // a string longer than any recorded
            b[strings[0]] = abi::kMaxStringBytes + 1;
            break;
          case 2:  // a string that swallows what follows it, or runs past the block
            b[strings[0]] = abi::kMaxStringBytes;
            break;
          case 3:  // an end marker before the block's end
            std::memset(b + starts[1], 0, 8);
            break;
          case 4:  // a clock value far ahead of the thread's others
            b[starts[1] + 7] ^= 0x40;
            break;
        }
      }
      c.payload_crc = file::crc32c(0, payload, c.stored_size);
      c.header_crc = file::crc32c(0, &c, offsetof(file::ChunkHeader, header_crc));
      std::memcpy(bytes.data() + off, &c, sizeof(c));
    }
    off += sizeof(c) + c.stored_size;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return damaged;
}

TEST(ColumnsTest, HostileRecordsInAFileWithValidChecksums) {
  std::string segment =
      testing::run_keeping_segment("NANOTRACE_BUFFER=8M " + kBin + "/export_helper --pairs 30000");
  ASSERT_FALSE(segment.empty());
  auto trace = Trace::open(segment);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  std::string file = ::testing::TempDir() + "hostile-" + std::to_string(getpid()) + ".ntr";
  ASSERT_TRUE(write_snapshot(**trace, file, false).ok());
  EXPECT_GE(damage_records(file, **trace), 5);
  auto damaged = Trace::open(file);
  ASSERT_TRUE(damaged.ok()) << damaged.status().message();
  expect_same(**damaged);
  expect_same(**damaged, {"test:strings"});
  // The same losses and counts, thread by thread.
  auto source = (*damaged)->read_all();
  Record r;
  while (source->next(&r)) {
  }
  auto set = read_columns(**damaged);
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->threads.size(), source->threads().size());
  uint64_t corrupt = 0;
  for (size_t i = 0; i < set->threads.size(); ++i) {
    const ThreadStats &a = source->threads()[i], &b = set->threads[i];
    EXPECT_EQ(b.records, a.records) << i;
    EXPECT_EQ(b.corrupt_blocks, a.corrupt_blocks) << i;
    EXPECT_EQ(b.overwritten, a.overwritten) << i;
    corrupt += a.corrupt_blocks;
  }
  EXPECT_GE(corrupt, 3u);
  EXPECT_EQ(set->corrupt_blocks, corrupt);
  std::filesystem::remove(file);
  std::filesystem::remove(segment);
}

}  // namespace
}  // namespace nanotrace
