// Native blocks inserted on several connections at once while the next ones are built: the
// server parses, sorts and writes each insert on a thread of its own, so N inserts in flight
// use N of its cores where one connection (clickhouse-client's) uses one, and the shipper's
// thread builds the next block meanwhile.
//
// A block handed to send() is taken whole (its columns moved out, no copy) and replaced by an
// empty block of the same columns, recycled from the blocks sent before (their memory kept:
// no page is faulted in twice). At most `connections` blocks are in flight; send() waits for
// one to finish when that many are. Each block goes as one insert (one part on the server) to
// the first free connection. The first error of any insert is kept: blocks not yet sent are
// dropped, later errors are ignored, and send() and finish() return it. finish() (and the
// destructor) return only when no insert is running any more, so that whatever the caller does
// next (count, attach or drop the tables) sees every insert ended.
//
// Thread safety: send() and finish() from one thread (the shipper's); `insert` is called on
// the senders' threads, for one connection index by one thread only.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "nanotrace/status.hpp"
#include "ship/native_block.hpp"
#include "ship/schema.hpp"

namespace nanotrace::ship {

// Inserts one block into table `into` on connection `connection` (0 .. connections - 1): its
// bytes are `pieces` one after another (NativeBlock::pieces).
using InsertBlock = std::function<Status(size_t connection, const std::string& into,
                                         const std::vector<std::string_view>& pieces)>;

class BlockSenders {
 public:
  // connections: how many inserts run at once, one thread each (at least 1).
  BlockSenders(size_t connections, InsertBlock insert);
  ~BlockSenders();  // finish()
  BlockSenders(const BlockSenders&) = delete;
  BlockSenders& operator=(const BlockSenders&) = delete;

  // Inserts *block's rows into `into` (a table of `table`'s columns); *block becomes empty,
  // of the same columns. Returns the first error of an insert so far (the block then not
  // taken), or kInvalidArgument when the block is malformed (NativeBlock::pieces).
  Status send(const TableDef& table, const std::string& into, NativeBlock* block);
  // Waits until no insert runs or waits to run; the first error of any insert.
  Status finish();

 private:
  struct Job {
    const TableDef* table;
    std::string into;
    std::unique_ptr<NativeBlock> block;
  };
  void run(size_t connection);

  InsertBlock insert_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  size_t in_flight_ = 0;  // queued or being sent
  size_t limit_ = 1;
  bool closing_ = false;
  Status error_;
  std::map<const TableDef*, std::vector<std::unique_ptr<NativeBlock>>> spare_;  // cleared
  std::vector<std::thread> threads_;
};

}  // namespace nanotrace::ship
