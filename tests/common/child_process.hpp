// Test helper: runs a program as a child process with extra environment variables, a pipe
// to its stdin (closing it tells our producers to finish) and a pipe from its stdout.
#pragma once

#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace nanotrace::testing {

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = fdopen(out[0], "r");
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      wait();
    }
    if (stdin_ >= 0) close(stdin_);
    if (stdout_) fclose(stdout_);
  }

  pid_t pid() const { return pid_; }
  // Next line of the child's stdout without the newline; empty at EOF.
  std::string read_line() {
    char buf[4096];
    if (!stdout_ || !fgets(buf, sizeof(buf), stdout_)) return std::string();
    std::string s = buf;
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void write_line(const std::string& line) {
    std::string text = line + "\n";
    if (stdin_ >= 0 && ::write(stdin_, text.data(), text.size()) < 0) std::abort();
  }
  void close_stdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }
  // Exit status as from waitpid (use WIFEXITED etc.).
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* stdout_ = nullptr;
  bool reaped_ = false;
};

// Runs a shell command; returns its stdout, and its exit code in *code.
inline std::string run_command(const std::string& command, int* code) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) {
    *code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// Runs a shell command that prints "... segment PATH" (a traced helper) to completion with
// NANOTRACE_KEEP=1; returns PATH, or "" if it failed or printed none (its stdout in *out).
inline std::string run_keeping_segment(const std::string& command, std::string* out = nullptr) {
  int code = 0;
  std::string printed = run_command("NANOTRACE_KEEP=1 " + command, &code);
  if (out != nullptr) *out = printed;
  size_t at = printed.find("segment ");
  if (code != 0 || at == std::string::npos) return "";
  std::string path = printed.substr(at + 8);
  return path.substr(0, path.find_first_of(" \n"));
}

inline std::string segment_of(pid_t pid) { return "/dev/shm/nanotrace-" + std::to_string(pid); }

// Every segment a process left under its name or an alternative one (nanotrace-<pid>.<n>).
inline std::vector<std::string> segments_of(pid_t pid) {
  std::vector<std::string> out;
  glob_t g;
  // Not "nanotrace-<pid>*": that also matches the segments of pid 12345 for pid 1234.
  if (access(segment_of(pid).c_str(), F_OK) == 0) out.push_back(segment_of(pid));
  const std::string alternatives = segment_of(pid) + ".*";
  if (glob(alternatives.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

}  // namespace nanotrace::testing
