// The ClickHouse encodings without a server (make check): LEB128 varints, Native blocks
// (fixed-size, String and Array columns, byte for byte), the typed columns' checks, the
// compressed-block framing around zstd frames, quoting of literals and identifiers, and the
// parsers of ClickHouse's answers (error texts of three releases, numbers, TabSeparated).
// What the server makes of these bytes is tests/ship/ship_test.cc's (real servers).
#include "ship/native_block.hpp"

#include <gtest/gtest.h>
#include <zstd.h>

#include <cstring>
#include <string>

#include "ship/clickhouse_answer.hpp"
#include "ship/clickhouse_http.hpp"
#include "ship/schema.hpp"
#include "ship/shipper.hpp"
#include "ship/trace_rows.hpp"

namespace nanotrace::ship {
namespace {

std::string varint(uint64_t v) {
  std::string out;
  put_varint(&out, v);
  return out;
}

std::string bytes(std::initializer_list<int> b) {
  std::string out;
  for (int c : b) out.push_back(static_cast<char>(c));
  return out;
}

template <class T>
std::string le(T v) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

TEST(VarintTest, Leb128) {
  EXPECT_EQ(varint(0), bytes({0}));
  EXPECT_EQ(varint(1), bytes({1}));
  EXPECT_EQ(varint(127), bytes({0x7f}));
  EXPECT_EQ(varint(128), bytes({0x80, 0x01}));
  EXPECT_EQ(varint(300), bytes({0xac, 0x02}));
  EXPECT_EQ(varint(16383), bytes({0xff, 0x7f}));
  EXPECT_EQ(varint(16384), bytes({0x80, 0x80, 0x01}));
  EXPECT_EQ(varint(~0ull), bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST(NativeBlockTest, ColumnsByteForByte) {
  NativeBlock b;
  const size_t id = b.add_column("id", "UInt64");
  const size_t day = b.add_column("date", "Date");
  const size_t name = b.add_column("name", "String");
  const size_t small = b.add_column("small", "UInt8");
  const size_t signed_ = b.add_column("v", "Int64");
  const size_t f = b.add_column("f", "Float64");
  for (uint64_t row = 0; row < 2; ++row) {
    b.put<uint64_t>(id, 7 + row);
    b.put_date(day, static_cast<uint16_t>(20000 + row));
    b.put_string(name, row == 0 ? "ab" : "");
    b.put<uint8_t>(small, 1);
    b.put<int64_t>(signed_, -1);
    b.put<double>(f, 0.5);
    b.end_row();
  }
  std::string out;
  ASSERT_TRUE(b.write(&out).ok());
  std::string want = varint(6) + varint(2);
  want += varint(2) + "id" + varint(6) + "UInt64" + le<uint64_t>(7) + le<uint64_t>(8);
  want += varint(4) + "date" + varint(4) + "Date" + le<uint16_t>(20000) + le<uint16_t>(20001);
  want += varint(4) + "name" + varint(6) + "String" + varint(2) + "ab" + varint(0);
  want += varint(5) + "small" + varint(5) + "UInt8" + bytes({1, 1});
  want += varint(1) + "v" + varint(5) + "Int64" + le<int64_t>(-1) + le<int64_t>(-1);
  want += varint(1) + "f" + varint(7) + "Float64" + le<double>(0.5) + le<double>(0.5);
  EXPECT_EQ(out, want);
}

// An Array(T): one running UInt64 offset per row, then every element as a column of T.
TEST(NativeBlockTest, ArraysAreOffsetsThenElements) {
  NativeBlock b;
  const size_t keys = b.add_column("keys", "Array(String)");
  const size_t values = b.add_column("values", "Array(UInt32)");
  // Rows: ["a", "bc"] [1, 2]; [] []; ["d"] [3].
  b.put_string(keys, "a");
  b.put_string(keys, "bc");
  b.put<uint32_t>(values, 1);
  b.put<uint32_t>(values, 2);
  b.end_array(keys);
  b.end_array(values);
  b.end_row();
  b.end_array(keys);
  b.end_array(values);
  b.end_row();
  b.put_string(keys, "d");
  b.put<uint32_t>(values, 3);
  b.end_array(keys);
  b.end_array(values);
  b.end_row();
  std::string out;
  ASSERT_TRUE(b.write(&out).ok());
  std::string want = varint(2) + varint(3);
  want += varint(4) + "keys" + varint(13) + "Array(String)";
  want += le<uint64_t>(2) + le<uint64_t>(2) + le<uint64_t>(3);
  want += varint(1) + "a" + varint(2) + "bc" + varint(1) + "d";
  want += varint(6) + "values" + varint(13) + "Array(UInt32)";
  want += le<uint64_t>(2) + le<uint64_t>(2) + le<uint64_t>(3);
  want += le<uint32_t>(1) + le<uint32_t>(2) + le<uint32_t>(3);
  EXPECT_EQ(out, want);
  // Cleared, the declarations stay and the values go.
  b.clear();
  out.clear();
  ASSERT_TRUE(b.write(&out).ok());
  EXPECT_EQ(out, varint(2) + varint(0) + varint(4) + "keys" + varint(13) + "Array(String)" +
                     varint(6) + "values" + varint(13) + "Array(UInt32)");
}

// Columns past their first buffer (grown by realloc), a block moved whole (what BlockSenders
// does to a full block), and the pieces without a copy: one after another, the same bytes.
TEST(NativeBlockTest, GrownMovedAndInPiecesTheSameBytes) {
  NativeBlock b;
  const size_t id = b.add_column("id", "UInt64");
  const size_t name = b.add_column("name", "String");
  std::string ids, names;
  for (uint64_t row = 0; row < 5000; ++row) {
    b.put<uint64_t>(id, row * 3);
    b.put_string(name, std::string(row % 5, 'q'));
    b.end_row();
    ids += le<uint64_t>(row * 3);
    names += varint(row % 5) + std::string(row % 5, 'q');
  }
  const std::string want = varint(2) + varint(5000) + varint(2) + "id" + varint(6) + "UInt64" +
                           ids + varint(4) + "name" + varint(6) + "String" + names;
  NativeBlock moved = std::move(b);
  std::string out;
  ASSERT_TRUE(moved.write(&out).ok());
  EXPECT_EQ(out, want);
  std::string headers;
  std::vector<std::string_view> pieces;
  ASSERT_TRUE(moved.pieces(&headers, &pieces).ok());
  std::string joined;
  for (std::string_view p : pieces) joined.append(p);
  EXPECT_EQ(joined, want);
  // Cleared, the memory stays and new rows start from nothing.
  moved.clear();
  moved.put<uint64_t>(id, 9);
  moved.put_string(name, "z");
  moved.end_row();
  out.clear();
  ASSERT_TRUE(moved.write(&out).ok());
  EXPECT_EQ(out, varint(2) + varint(1) + varint(2) + "id" + varint(6) + "UInt64" + le<uint64_t>(9) +
                     varint(4) + "name" + varint(6) + "String" + varint(1) + "z");
}

// Blocks to a server on this machine go uncompressed by default: which URLs are this machine.
TEST(ClickHouseUrlTest, LoopbackAddressesAreThisMachine) {
  for (const char* url : {"http://127.0.0.1:8123", "http://localhost:8123/", "http://[::1]:8123",
                          "http://u:p@127.0.0.2/", "http://localhost"}) {
    auto c = ClickHouseHttp::open(url);
    ASSERT_TRUE(c.ok()) << url << ": " << c.status().message();
    EXPECT_TRUE((*c)->loopback()) << url;
  }
  for (const char* url :
       {"http://10.0.0.1:8123", "http://ch.example:8123/", "http://127.0.0.1.example/",
        "http://localhost@db.example:8123/", "http://[::2]:8123"}) {
    auto c = ClickHouseHttp::open(url);
    ASSERT_TRUE(c.ok()) << url << ": " << c.status().message();
    EXPECT_FALSE((*c)->loopback()) << url;
  }
}

TEST(NativeBlockTest, TextIsMadeValidUtf8) {
  NativeBlock b;
  const size_t s = b.add_column("s", "String");
  b.put_text(s, "a\xff");
  b.end_row();
  std::string out;
  ASSERT_TRUE(b.write(&out).ok());
  EXPECT_EQ(out, varint(1) + varint(1) + varint(1) + "s" + varint(6) + "String" + varint(4) +
                     "a\xef\xbf\xbd");
}

// A value of another type than its column's, a row short of a value, an undeclarable type:
// write() refuses, names the column, and appends nothing.
TEST(NativeBlockTest, MistakesAreRefusedNotSent) {
  {
    NativeBlock b;
    const size_t id = b.add_column("trace_id", "UInt64");
    b.put<uint32_t>(id, 1);
    b.end_row();
    std::string out;
    Status s = b.write(&out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("trace_id is UInt64, not UInt32"), std::string::npos) << s.message();
    EXPECT_TRUE(out.empty());
    b.clear();  // forgets it
    b.put<uint64_t>(id, 1);
    b.end_row();
    EXPECT_TRUE(b.write(&out).ok());
  }
  {
    NativeBlock b;
    const size_t a = b.add_column("a", "UInt8");
    b.add_column("b", "String");
    b.put<uint8_t>(a, 1);
    b.end_row();
    std::string out;
    Status s = b.write(&out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("column b holds 0 values for 1 rows"), std::string::npos)
        << s.message();
    EXPECT_TRUE(out.empty());
  }
  {
    NativeBlock b;
    const size_t a = b.add_column("a", "Array(UInt8)");
    b.put<uint8_t>(a, 1);
    b.end_row();  // the array was not closed
    std::string out;
    EXPECT_FALSE(b.write(&out).ok());
  }
  {
    NativeBlock b;
    b.add_column("n", "Nullable(UInt8)");
    std::string out;
    Status s = b.write(&out);
    EXPECT_NE(s.message().find("Nullable(UInt8)"), std::string::npos) << s.message();
  }
  {
    NativeBlock b;
    const size_t d = b.add_column("d", "UInt16");
    b.put_date(d, 1);  // a Date into a UInt16 column
    b.end_row();
    std::string out;
    EXPECT_FALSE(b.write(&out).ok());
  }
}

// Every column of the shipped schema has a type a Native block holds, and rows made by the
// shipper's own code (the traces row of an empty trace is not available here: a block per
// table, one row of zero values) write.
TEST(NativeBlockTest, EverySchemaTypeIsTyped) {
  for (const TableDef& t : schema_tables()) {
    for (const ColumnDef& c : t.columns) {
      auto type = parse_column_type(c.type);
      ASSERT_TRUE(type.has_value()) << t.name << "." << c.name << " " << c.type;
      EXPECT_EQ(column_type_name(*type), c.type);
    }
    NativeBlock b = block_for(t);
    std::string out;
    EXPECT_TRUE(b.write(&out).ok()) << t.name;
  }
  EXPECT_FALSE(parse_column_type("Array(Array(UInt8))").has_value());
  EXPECT_FALSE(parse_column_type("LowCardinality(String)").has_value());
  EXPECT_FALSE(parse_column_type("Array()").has_value());
  EXPECT_FALSE(parse_column_type("").has_value());
}

// ClickHouse's compressed-block framing: per block a 16-byte checksum (zero: not checked),
// the method byte 0x90 (zstd), the compressed size counting the method byte and both sizes,
// the uncompressed size, then one zstd frame with its content checksum; 1 MiB of data each.
TEST(CompressTest, FramesZstdBlocksOfAMebibyte) {
  std::string data;
  for (uint32_t i = 0; data.size() < (1u << 20) * 2 + 12345; ++i) {
    data.append(reinterpret_cast<const char*>(&i), sizeof(i));
  }
  std::string out;
  compress_blocks(data, &out);
  std::string back;
  size_t at = 0, blocks = 0;
  while (at < out.size()) {
    ASSERT_GE(out.size() - at, 25u);
    EXPECT_EQ(out.substr(at, 16), std::string(16, '\0'));
    EXPECT_EQ(static_cast<uint8_t>(out[at + 16]), 0x90);
    uint32_t compressed = 0, raw = 0;
    std::memcpy(&compressed, out.data() + at + 17, 4);
    std::memcpy(&raw, out.data() + at + 21, 4);
    ASSERT_GE(compressed, 9u);
    ASSERT_LE(at + 16 + compressed, out.size());
    EXPECT_LE(raw, 1u << 20);
    const char* frame = out.data() + at + 25;
    const size_t frame_size = compressed - 9;
    // A zstd frame: its magic, then the frame header descriptor, whose bit 2 says a content
    // checksum (XXH64) ends the frame.
    ASSERT_GE(frame_size, 5u);
    uint32_t magic = 0;
    std::memcpy(&magic, frame, 4);
    EXPECT_EQ(magic, 0xFD2FB528u);
    EXPECT_TRUE(static_cast<uint8_t>(frame[4]) & 0x04) << "no content checksum";
    std::string chunk(raw, '\0');
    ASSERT_EQ(ZSTD_decompress(chunk.data(), chunk.size(), frame, frame_size), raw);
    back += chunk;
    at += 16 + compressed;
    ++blocks;
  }
  EXPECT_EQ(blocks, 3u);
  EXPECT_EQ(back, data);
  // Nothing in, nothing out.
  std::string none;
  compress_blocks("", &none);
  EXPECT_TRUE(none.empty());
}

TEST(QuotingTest, LiteralsAndIdentifiers) {
  EXPECT_EQ(quote_string("plain"), "'plain'");
  EXPECT_EQ(quote_string("it's"), "'it\\'s'");
  EXPECT_EQ(quote_string("a\\b"), "'a\\\\b'");
  EXPECT_EQ(quote_string("\\'"), "'\\\\\\''");
  EXPECT_EQ(quote_string(""), "''");
  EXPECT_EQ(quote_identifier("events_local"), "`events_local`");
  EXPECT_EQ(quote_identifier("we`ird\\db"), "`we\\`ird\\\\db`");
}

TEST(AnswerTest, ErrorsOfThreeReleases) {
  // 18.16 (Debian 12).
  ServerError e = parse_error_answer(
      404,
      "Code: 60, e.displayText() = DB::Exception: Table nanotrace.x doesn't exist., e.what() = "
      "DB::Exception\n");
  EXPECT_EQ(e.code, 60);
  EXPECT_EQ(e.name, "UNKNOWN_TABLE");
  EXPECT_EQ(e.message, "Table nanotrace.x doesn't exist.");
  EXPECT_FALSE(e.transient);
  // 21.x.
  e = parse_error_answer(500,
                         "Code: 241, e.displayText() = DB::Exception: Memory limit (total) "
                         "exceeded: would use 9.31 GiB (version 21.3.20.1 (official build))\n");
  EXPECT_EQ(e.code, 241);
  EXPECT_EQ(e.name, "MEMORY_LIMIT_EXCEEDED");
  EXPECT_EQ(e.message, "Memory limit (total) exceeded: would use 9.31 GiB");
  EXPECT_TRUE(e.transient);
  // 22 and later, with the code's name.
  e = parse_error_answer(
      500,
      "Code: 252. DB::Exception: Too many parts (300). Merges are processing significantly "
      "slower than inserts. (TOO_MANY_PARTS) (version 23.8.1.1)\n",
      "252");
  EXPECT_EQ(e.code, 252);
  EXPECT_EQ(e.name, "TOO_MANY_PARTS");
  EXPECT_TRUE(e.transient);
  EXPECT_EQ(e.message,
            "Too many parts (300). Merges are processing significantly slower than inserts.");
  e = parse_error_answer(403,
                         "Code: 516. DB::Exception: default: Authentication failed: password is "
                         "incorrect. (AUTHENTICATION_FAILED) (version 23.8.1.1)\n");
  EXPECT_EQ(e.code, 516);
  EXPECT_FALSE(e.transient);
  // A name we do not know, from the answer.
  e = parse_error_answer(500, "Code: 9999. DB::Exception: New. (SOMETHING_NEW) (version 30.1)\n");
  EXPECT_EQ(e.name, "SOMETHING_NEW");
  EXPECT_TRUE(e.transient) << "an unknown code with a 5xx status is retried";
  e = parse_error_answer(400, "Code: 9998. DB::Exception: Bad. (OTHER) (version 30.1)\n");
  EXPECT_FALSE(e.transient) << "an unknown code with a 4xx status is refused";
  // The code from the header only.
  e = parse_error_answer(500, "something broke\n", "62");
  EXPECT_EQ(e.code, 62);
  EXPECT_FALSE(e.transient);
  // A proxy's answer: no code, HTML; a 502 is transient, a 401 refused.
  e = parse_error_answer(502, "<html><body>Bad gateway</body></html>");
  EXPECT_EQ(e.code, -1);
  EXPECT_TRUE(e.transient);
  EXPECT_EQ(e.message, "<html><body>Bad gateway</body></html>");
  EXPECT_FALSE(parse_error_answer(401, "").transient);
  EXPECT_EQ(parse_error_answer(503, "").message, "HTTP status 503 without a message");
}

TEST(AnswerTest, MessagesAreShortPrintableLines) {
  const std::string hostile =
      "Code: 62, e.displayText() = DB::Exception: Syntax error \x1b[31m\xff\xfe" +
      std::string(2000, 'x') + "\nstack trace...";
  ServerError e = parse_error_answer(400, hostile);
  EXPECT_EQ(e.code, 62);
  EXPECT_LE(e.message.size(), 403u);
  EXPECT_EQ(e.message.find('\x1b'), std::string::npos);
  EXPECT_EQ(e.message.find('\n'), std::string::npos);
  EXPECT_EQ(e.message.find("stack"), std::string::npos);
  EXPECT_EQ(e.message.substr(e.message.size() - 3), "...");
  // Cut at a character, not inside one.
  EXPECT_EQ(printable("ab\xc3\xa9", 3), "ab...");
  EXPECT_EQ(printable("ab\xc3\xa9", 4), "ab\xc3\xa9");
  // "Code: " with no number, or a huge one: no code.
  EXPECT_EQ(parse_error_answer(500, "Code: , nothing").code, -1);
  EXPECT_EQ(parse_error_answer(500, "Code: 99999999999999999999").code, -1);
}

TEST(AnswerTest, Classes) {
  for (int refused : {62, 60, 81, 16, 53, 193, 194, 516, 497, 164, 170, 291}) {
    EXPECT_EQ(classify_code(refused), CodeClass::kRefused) << refused;
  }
  for (int transient : {159, 202, 209, 210, 241, 242, 243, 252, 279, 319, 999}) {
    EXPECT_EQ(classify_code(transient), CodeClass::kTransient) << transient;
  }
  EXPECT_EQ(classify_code(123456), CodeClass::kUnknown);
}

TEST(AnswerTest, Counts) {
  EXPECT_EQ(*parse_count("42\n"), 42u);
  EXPECT_EQ(*parse_count("0"), 0u);
  EXPECT_EQ(*parse_count("18446744073709551615\n"), ~0ull);
  EXPECT_FALSE(parse_count("").ok());
  EXPECT_FALSE(parse_count("-1\n").ok());
  EXPECT_FALSE(parse_count("12 rows\n").ok());
  EXPECT_FALSE(parse_count("1\n2\n").ok());
  EXPECT_FALSE(parse_count("18446744073709551616\n").ok());
}

TEST(AnswerTest, TabSeparated) {
  auto rows = parse_tab_separated("a\tb\\tc\n\\\\\\'\\n\t\\x41\\0\n", 2);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0][0], "a");
  EXPECT_EQ((*rows)[0][1], "b\tc");
  EXPECT_EQ((*rows)[1][0], "\\'\n");
  EXPECT_EQ((*rows)[1][1], std::string("A\0", 2));
  EXPECT_TRUE(parse_tab_separated("", 3)->empty());
  EXPECT_EQ(parse_tab_separated("\n", 1)->at(0).at(0), "");
  EXPECT_FALSE(parse_tab_separated("a\tb\n", 1).ok());
  EXPECT_FALSE(parse_tab_separated("a\n", 2).ok());
  EXPECT_FALSE(parse_tab_separated("a", 1).ok());
  EXPECT_FALSE(parse_tab_separated("a\\", 1).ok());
  EXPECT_FALSE(parse_tab_separated("\\x4\n", 1).ok());
  EXPECT_FALSE(parse_tab_separated("\\xzz\n", 1).ok());
}

}  // namespace
}  // namespace nanotrace::ship
