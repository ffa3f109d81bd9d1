// Export benchmark driver: measures, on one kept segment, the reader alone (read_all() drained
// in this process) and `nanotrace export` to each format (a child process: wall time and its
// peak RSS from wait4's ru_maxrss), and writes the figures as JSON.
//
//   export_bench --cli PATH/nanotrace --source SEGMENT --out DIR --json FILE
//                [--formats ctf,chrome,chrome@null,...] [--keep-output]
// (FORMAT@null writes to /dev/null: the encoder without the file system.)
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

}  // namespace

int main(int argc, char** argv) {
  std::string cli, source, out, json_path, formats = "ctf,chrome,chrome@null,perfetto,jsonl,csv";
  bool keep = false;
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
    result["records"] = n;
    result["lost"] = lost;
    result["reader"] = {{"seconds", dt}, {"events_per_second", n / dt}, {"fields", sum}};
    std::printf("reader: %llu records in %.3f s = %.1f M events/s\n",
                static_cast<unsigned long long>(n), dt, n / dt / 1e6);
  }

  std::filesystem::create_directories(out);
  size_t start = 0;
  while (start <= formats.size()) {
    size_t comma = formats.find(',', start);
    std::string format = formats.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? formats.size() + 1 : comma + 1;
    if (format.empty()) continue;
    // "FORMAT@null": write to /dev/null, to separate encoding from file-system cost.
    std::string label = format;
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
    // ru_maxrss counts the touched pages of the mapped segment too (shared memory); the
    // private memory the exporter holds is RssAnon, sampled here every 5 ms.
    int status = 0;
    struct rusage ru {};
    uint64_t peak_anon_kb = 0;
    for (;;) {
      pid_t done = wait4(pid, &status, WNOHANG, &ru);
      if (done == pid) break;
      std::ifstream st("/proc/" + std::to_string(pid) + "/status");
      std::string key;
      uint64_t kb;
      while (st >> key) {
        if (key == "RssAnon:" && st >> kb) peak_anon_kb = std::max(peak_anon_kb, kb);
      }
      usleep(5000);
    }
    double dt = now_s() - t0;
    uint64_t n = result["records"];
    uint64_t bytes = to_null ? 0 : dir_bytes(target);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    result["formats"][label] = {{"ok", ok},
                                {"seconds", dt},
                                {"events_per_second", n / dt},
                                {"peak_rss_bytes", static_cast<uint64_t>(ru.ru_maxrss) * 1024},
                                {"peak_anon_rss_bytes", peak_anon_kb * 1024},
                                {"user_seconds", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6},
                                {"system_seconds", ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6},
                                {"output_bytes", bytes}};
    std::printf(
        "%-13s %s %.3f s = %.1f M events/s, peak RSS %.1f MiB (private %.1f MiB), output %.1f "
        "MiB\n",
        label.c_str(), ok ? "ok  " : "FAIL", dt, n / dt / 1e6, ru.ru_maxrss / 1024.0,
        peak_anon_kb / 1024.0, bytes / 1048576.0);
    if (!keep && !to_null) std::filesystem::remove_all(target);
  }
  std::ofstream(json_path) << result.dump(2) << "\n";
  return 0;
}
