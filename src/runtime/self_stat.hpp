// This process's /proc/self/stat as the control thread reads it on every pass: through one
// descriptor kept open and read with pread. Opening and closing it on each pass raced with a
// program that closes every descriptor it did not open (a daemon, a fork child): the program
// closed our number, its next open took it, and our close then closed the program's file (its
// writes failed with EBADF in 2 of 20 loaded test rounds). The descriptor is checked to still
// name our file before each read, and a number found taken is left to the program, never
// closed.
#pragma once

#include <sys/types.h>

namespace nanotrace::runtime {

class SelfStat {
 public:
  struct Reading {
    int threads = 0;        // field 20: threads of the process, a main thread that left included
    char main_state = '?';  // field 3: the main thread's (Z once it left through pthread_exit)
  };

  // Reads the file, opening it when there is no descriptor yet or the program took our
  // number. False if it cannot be read (the reading is then unknown, not "one thread").
  bool read(Reading* out);
  // True when no thread of the program is left but the caller: one thread, or two of which
  // the main thread has left (it stays in the count as a zombie until the process ends).
  static bool only_caller_left(const Reading& r);
  // Closes the descriptor if it still names our file: a fork child's copy names the parent's
  // file, and an unloaded runtime leaves nothing open. Otherwise only forgets it.
  void close_if_ours();

 private:
  bool still_ours() const;
  bool open_fresh();

  int fd_ = -1;
  pid_t pid_ = 0;  // the process whose file fd_ names
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace nanotrace::runtime
