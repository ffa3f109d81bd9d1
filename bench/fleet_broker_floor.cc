// The broker's own floor for the fleet benchmark (scripts/fleet_bench.py): a bare NATS
// publish fanned out to subscriber processes, no tracer involved.
//   fleet_broker_floor sub URL TOKEN SUBJECT   prints "seq sent_ns received_ns" per message
//   fleet_broker_floor pub URL TOKEN SUBJECT   publishes one message per stdin line (its
//                                              CLOCK_REALTIME in the payload), prints "sent"
#include <nats/nats.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

namespace {

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void*) {
  uint64_t now = realtime_ns();
  std::string data(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg)));
  natsMsg_Destroy(msg);
  std::printf("%s %llu\n", data.c_str(), static_cast<unsigned long long>(now));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: fleet_broker_floor sub|pub URL TOKEN SUBJECT\n");
    return 2;
  }
  natsOptions* opts = nullptr;
  natsOptions_Create(&opts);
  natsOptions_SetURL(opts, argv[2]);
  natsOptions_SetToken(opts, argv[3]);
  natsConnection* nc = nullptr;
  if (natsConnection_Connect(&nc, opts) != NATS_OK) {
    std::fprintf(stderr, "cannot connect to %s\n", argv[2]);
    return 1;
  }
  if (std::strcmp(argv[1], "sub") == 0) {
    natsSubscription* sub = nullptr;
    natsConnection_Subscribe(&sub, nc, argv[4], on_message, nullptr);
    natsConnection_Flush(nc);
    std::printf("ready\n");
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    natsSubscription_Destroy(sub);
  } else {
    std::string line;
    for (uint64_t seq = 0; std::getline(std::cin, line); ++seq) {
      std::string payload = std::to_string(seq) + " " + std::to_string(realtime_ns());
      natsConnection_PublishString(nc, argv[4], payload.c_str());
      natsConnection_Flush(nc);
      std::printf("sent\n");
      std::fflush(stdout);
    }
  }
  natsConnection_Destroy(nc);
  natsOptions_Destroy(opts);
  return 0;
}
