// Export benchmark driver: measures, on one kept segment, the reader alone (read_all() drained
// in this process) and `nanotrace export` to each format (a child process: wall time and its
// peak RSS from wait4's ru_maxrss), and writes the figures as JSON.
//
//   export_bench --cli PATH/nanotrace --source SEGMENT --out DIR --json FILE
//                [--formats ctf,chrome,chrome@null,...] [--repeat N] [--keep-output]
// (FORMAT@null writes to /dev/null: the encoder without the file system.) With --repeat,
// each format runs N times in interleaved rounds and reports its median. After each run, the
// time to write as many bytes of zeros to the same directory is measured too: the output's
// share of the time.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanotrace/reader.hpp"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t dir_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return fs::file_size(path, ec);
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(path, ec)) {
    if (e.is_regular_file(ec)) n += e.file_size(ec);
  }
  return n;
}

// One `nanotrace export` run as a child process.
struct Run {
  bool ok = false;
  double seconds = 0;
  uint64_t peak_rss_kb = 0;   // ru_maxrss
  uint64_t peak_anon_kb = 0;  // RssAnon, sampled every 5 ms: the memory the exporter holds
  double user_seconds = 0;
  double system_seconds = 0;
  uint64_t output_bytes = 0;
  double write_floor_seconds = 0;  // writing as many bytes of zeros to the same directory
};

// The file system's part of an export: the time to write `bytes` to a new file in dir with
// 1 MiB write(2) calls, as the exporters do. On a VM, fresh pages can cost more than the
// copy into them, so this moves with the machine's state; it runs right after the export.
double write_floor(const std::string& dir, uint64_t bytes) {
  std::string path = dir + "/write-floor";
  std::vector<char> block(1u << 20, 0);
  double t0 = now_s();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  for (uint64_t done = 0; done < bytes;) {
    ssize_t n = ::write(fd, block.data(), std::min<uint64_t>(block.size(), bytes - done));
    if (n <= 0) break;
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  double dt = now_s() - t0;
  ::unlink(path.c_str());
  return dt;
}

// label: a format, or "FORMAT@null" to write to /dev/null (the encoder without the file
// system).
Run run_export(const std::string& cli, const std::string& source, const std::string& out,
               const std::string& label, bool keep) {
  std::string format = label;
  bool to_null = format.size() > 5 && format.compare(format.size() - 5, 5, "@null") == 0;
  if (to_null) format.resize(format.size() - 5);
  std::string target = to_null ? "/dev/null" : out + "/export." + format;
  if (!to_null) std::filesystem::remove_all(target);
  double t0 = now_s();
  pid_t pid = fork();
  if (pid == 0) {
    execl(cli.c_str(), cli.c_str(), "export", source.c_str(), "--format", format.c_str(), "-o",
          target.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  Run run;
  int status = 0;
  struct rusage ru {};
  for (;;) {
    pid_t done = wait4(pid, &status, WNOHANG, &ru);
    if (done == pid) break;
    std::ifstream st("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    uint64_t kb;
    while (st >> key) {
      if (key == "RssAnon:" && st >> kb) run.peak_anon_kb = std::max(run.peak_anon_kb, kb);
    }
    usleep(5000);
  }
  run.seconds = now_s() - t0;
  run.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  run.peak_rss_kb = static_cast<uint64_t>(ru.ru_maxrss);
  run.user_seconds = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
  run.system_seconds = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  run.output_bytes = to_null ? 0 : dir_bytes(target);
  if (!keep && !to_null) std::filesystem::remove_all(target);
  if (!to_null) run.write_floor_seconds = write_floor(out, run.output_bytes);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cli, source, out, json_path, formats = "ctf,chrome,chrome@null,perfetto,jsonl,csv";
  bool keep = false;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--cli") {
      cli = next();
    } else if (a == "--source") {
      source = next();
    } else if (a == "--out") {
      out = next();
    } else if (a == "--json") {
      json_path = next();
    } else if (a == "--formats") {
      formats = next();
    } else if (a == "--keep-output") {
      keep = true;
    } else if (a == "--repeat") {
      repeat = std::max(1, std::atoi(next().c_str()));
    } else {
      std::fprintf(stderr, "export_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (cli.empty() || source.empty() || out.empty() || json_path.empty()) {
    std::fprintf(stderr,
                 "usage: export_bench --cli NANOTRACE --source SEGMENT --out DIR --json FILE\n");
    return 2;
  }
  nlohmann::json result;
  result["source"] = source;
  uint64_t records = 0;

  // The reader alone: what every exporter pays before encoding.
  {
    auto trace = nanotrace::Trace::open(source);
    if (!trace.ok()) {
      std::fprintf(stderr, "export_bench: %s\n", trace.status().message().c_str());
      return 1;
    }
    double t0 = now_s();
    auto src = (*trace)->read_all();
    nanotrace::Record r;
    uint64_t n = 0, sum = 0;
    while (src->next(&r)) {
      ++n;
      sum += r.field_count;
    }
    double dt = now_s() - t0;
    uint64_t lost = 0;
    for (const auto& t : src->threads()) lost += t.lost();
    records = n;
    result["records"] = n;
    result["lost"] = lost;
    result["reader"] = {{"seconds", dt}, {"events_per_second", n / dt}, {"fields", sum}};
    std::printf("reader: %llu records in %.3f s = %.1f M events/s\n",
                static_cast<unsigned long long>(n), dt, n / dt / 1e6);
  }

  std::filesystem::create_directories(out);
  std::vector<std::string> labels;
  for (size_t at = 0; at <= formats.size();) {
    size_t comma = std::min(formats.find(',', at), formats.size());
    if (comma > at) labels.push_back(formats.substr(at, comma - at));
    at = comma + 1;
  }
  // Rounds over all formats (A B C A B C ...), so that a slow spell of the machine does not
  // fall on one format only; each format reports its median.
  std::vector<std::vector<Run>> runs(labels.size());
  for (int round = 0; round < repeat; ++round) {
    for (size_t i = 0; i < labels.size(); ++i) {
      runs[i].push_back(run_export(cli, source, out, labels[i], keep));
      const Run& r = runs[i].back();
      std::printf(
          "%-13s %s %.3f s = %.1f M events/s, peak RSS %.1f MiB (private %.1f MiB), "
          "output %.1f MiB (writing it alone: %.3f s)\n",
          labels[i].c_str(), r.ok ? "ok  " : "FAIL", r.seconds, records / r.seconds / 1e6,
          r.peak_rss_kb / 1024.0, r.peak_anon_kb / 1024.0, r.output_bytes / 1048576.0,
          r.write_floor_seconds);
    }
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    std::vector<Run>& v = runs[i];
    std::vector<double> seconds, floors;
    bool ok = true;
    uint64_t rss = 0, anon = 0;
    for (const Run& r : v) {
      seconds.push_back(r.seconds);
      floors.push_back(r.write_floor_seconds);
      ok &= r.ok;
      rss = std::max(rss, r.peak_rss_kb);
      anon = std::max(anon, r.peak_anon_kb);
    }
    std::sort(seconds.begin(), seconds.end());
    std::sort(floors.begin(), floors.end());
    double median = seconds[seconds.size() / 2];
    double floor = floors[floors.size() / 2];
    result["formats"][labels[i]] = {{"ok", ok},
                                    {"seconds", median},
                                    {"runs_seconds", seconds},
                                    {"events_per_second", records / median},
                                    {"peak_rss_bytes", rss * 1024},
                                    {"peak_anon_rss_bytes", anon * 1024},
                                    {"user_seconds", v.back().user_seconds},
                                    {"system_seconds", v.back().system_seconds},
                                    {"output_bytes", v.back().output_bytes},
                                    {"write_floor_seconds", floor},
                                    {"write_floor_runs_seconds", floors}};
    if (repeat > 1) {
      std::printf(
          "%-13s median of %d: %.3f s = %.1f M events/s (writing the output alone: %.3f s)\n",
          labels[i].c_str(), repeat, median, records / median / 1e6, floor);
    }
  }
  std::ofstream(json_path) << result.dump(2) << "\n";
  return 0;
}
