// Test helper: a real clickhouse-server of our own, on ports and a data directory of its own
// under a temporary directory, listening on 127.0.0.1 only; with the cluster `nt` of the
// shards it is told about (for Distributed tables). Start, kill (SIGKILL: a crash), start
// again on the same data.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ship/clickhouse_http.hpp"

namespace nanotrace::testing {

// A port no socket uses now on 127.0.0.1 (the kernel's choice).
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

class ClickHouseServer {
 public:
  // dir: its own directory (created). shards: the TCP ports of the cluster's shards, in order
  // (this server's own among them, or empty for no cluster).
  ClickHouseServer(std::string dir, int http_port, int tcp_port)
      : dir_(std::move(dir)), http_port_(http_port), tcp_port_(tcp_port) {}
  ~ClickHouseServer() { kill_now(); }

  int http_port() const { return http_port_; }
  int tcp_port() const { return tcp_port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  const std::string& dir() const { return dir_; }

  // Writes its configuration with cluster `nt` over the shards' TCP ports.
  void configure(const std::vector<int>& shards) {
    std::filesystem::create_directories(dir_ + "/data");
    std::string cluster;
    for (int port : shards) {
      cluster += "<shard><replica><host>127.0.0.1</host><port>" + std::to_string(port) +
                 "</port></replica></shard>";
    }
    std::ofstream(dir_ + "/config.xml")
        << "<?xml version=\"1.0\"?>\n<yandex>\n"
        << "<logger><level>warning</level><log>" << dir_ << "/server.log</log><errorlog>" << dir_
        << "/server.err.log</errorlog><console>0</console></logger>\n"
        << "<listen_host>127.0.0.1</listen_host>\n"
        << "<http_port>" << http_port_ << "</http_port>\n"
        << "<tcp_port>" << tcp_port_ << "</tcp_port>\n"
        << "<path>" << dir_ << "/data/</path>\n<tmp_path>" << dir_ << "/tmp/</tmp_path>\n"
        << "<user_files_path>" << dir_ << "/user_files/</user_files_path>\n"
        << "<format_schema_path>" << dir_ << "/format_schemas/</format_schema_path>\n"
        << "<users_config>" << dir_ << "/users.xml</users_config>\n"
        << "<default_profile>default</default_profile>\n"
        << "<default_database>default</default_database>\n"
        << "<mark_cache_size>67108864</mark_cache_size>\n"
        << "<uncompressed_cache_size>67108864</uncompressed_cache_size>\n"
        << "<timezone>UTC</timezone>\n"
        << "<remote_servers><nt>" << cluster << "</nt></remote_servers>\n"
        << "</yandex>\n";
    std::ofstream(dir_ + "/users.xml")
        << "<?xml version=\"1.0\"?>\n<yandex><profiles><default></default></profiles>\n"
        << "<users><default><password></password><networks><ip>127.0.0.1</ip></networks>"
        << "<profile>default</profile><quota>default</quota></default></users>\n"
        << "<quotas><default></default></quotas></yandex>\n";
  }

  // Starts the server and waits until it answers (false, with the reason, if it does not
  // within 60 s).
  bool start(std::string* why) {
    pid_ = fork();
    if (pid_ == 0) {
      int log = open((dir_ + "/stdout.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(log, 1);
      dup2(log, 2);
      const std::string config = "--config-file=" + dir_ + "/config.xml";
      execlp("clickhouse-server", "clickhouse-server", config.c_str(), nullptr);
      _exit(127);
    }
    auto client = ship::ClickHouseHttp::open(url());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *why = "clickhouse-server exited at start (see " + dir_ + "/server.err.log)";
        return false;
      }
      if ((*client)->query("SELECT 1").ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *why = "clickhouse-server did not answer within 60 s";
    return false;
  }

  // SIGKILL, and wait for it: what a crash or a pulled plug does.
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // A client of it.
  std::unique_ptr<ship::ClickHouseHttp> client() const {
    return std::move(*ship::ClickHouseHttp::open(url()));
  }

 private:
  std::string dir_;
  int http_port_;
  int tcp_port_;
  pid_t pid_ = -1;
};

}  // namespace nanotrace::testing
