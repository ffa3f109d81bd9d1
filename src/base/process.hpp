// Small OS helpers shared by the runtime and the readers: process identity (pid plus start
// time, so a reused pid is not mistaken for the traced process) and futex wake-ups on
// shared memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nanotrace::sys {

// True if the CPU's TSC runs at a constant rate in every power state (CPUID 0x80000007 EDX
// bit 8): the runtime's clock then is the TSC.
bool tsc_is_invariant();
// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), 0 if unknown.
uint64_t proc_start_time(uint32_t pid);
// The inode number of pid's pidfs file (Linux 6.9+): unique per process since boot and the
// same in every image of it (exec), unlike a start time in clock ticks, which two processes
// that had one pid can share. 0 if unknown (an older kernel, or no such process).
uint64_t process_identity(uint32_t pid);
// The same of the process a pidfd refers to (no pid lookup that a reuse could race).
uint64_t pidfd_identity(int pidfd);
// The first 4 KiB of a small /proc file ("" if it cannot be read). Plain system calls: the
// runtime calls it at start-up, where an ifstream would pull in the C++ library's locales.
std::string read_proc_file(const char* path);
// True if pid is alive and is the same process: by identity (process_identity) when both it
// and the kernel's answer are known, else by start time when that is non-zero.
bool process_alive(uint32_t pid, uint64_t start_time, uint64_t identity = 0);
struct SegmentName {
  uint32_t pid;
  std::string path;  // /dev/shm/nanotrace-<pid>[.<start time>]
};
// Every /dev/shm/nanotrace-<pid> entry, and nanotrace-<pid>.<start time> (a dead process's
// segment set aside when its pid was reused); names that fit neither are skipped.
std::vector<SegmentName> list_segment_names();

// Liveness locks on a segment file. A traced process holds an open-file-description lock on
// byte kWriterLockByte of its segment, and an attached consumer one on kConsumerLockByte.
// The kernel releases such a lock when the last descriptor of that open file is closed:
// when its holder dies (even as an unreaped zombie) or execs (the descriptors are
// close-on-exec). So a held lock means a live holder, whatever happened to its pid.
inline constexpr int kWriterLockByte = 0;
inline constexpr int kConsumerLockByte = 1;
// Takes the lock on `byte` through fd (which must be open for writing). False if another
// open file holds it (or on error).
bool lock_segment_byte(int fd, int byte);
void unlock_segment_byte(int fd, int byte);
// True if an open file other than fd's holds a lock on `byte`.
bool segment_byte_locked(int fd, int byte);

// Wakes every waiter on a futex word in shared memory.
void futex_wake_all(uint32_t* word);
// Sleeps while *word == expected, at most timeout_ns.
void futex_wait(uint32_t* word, uint32_t expected, long timeout_ns);

}  // namespace nanotrace::sys
