// The fleet's link to its message broker: one NATS connection (Debian's libnats, the C client
// of nats-server) to a server or one of a cluster's, authenticated with the fleet's
// credentials, that reconnects on its own (to any of the servers) for as long as the process
// lives, so that an agent started while the broker is down, or that loses it, comes back
// without anyone's help. Messages are opaque bytes here; protocol.hpp says what they hold.
//
// Thread safety: publish, request and subscribe may be called from any thread; handlers run
// on the client library's delivery threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fleet/credentials.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

struct BrokerMessage {
  std::string subject;
  std::string reply;  // where an answer goes ("" if none asked)
  std::string data;
};

struct BrokerOptions {
  // A NATS server, or several of a cluster, comma-separated ("nats://a:4222,nats://b:4222"):
  // the client connects to one of them and, losing it, reconnects to another.
  std::string url = "nats://127.0.0.1:4222";
  Credentials credentials;
  std::string name;  // the connection's name, as the server lists it
  // Keep trying to connect for ever (the agent); false: fail at once (a command).
  bool retry = false;
  int timeout_ms = 2000;  // a connection attempt's
  // Latency over throughput (the agent): a publish is written to the socket by the caller at
  // once, instead of by the client's flusher thread, a wake-up later.
  bool send_asap = false;
  // The server does not send this connection what it published itself (the agent's freeze
  // announcement: one delivery, and one wake-up of the origin, fewer per freeze).
  bool no_echo = false;
  // Called (on a library thread) when the link goes down or comes back, with a reason.
  std::function<void(bool up, const std::string& why)> on_link;
};

class Broker {
 public:
  using Handler = std::function<void(BrokerMessage&& message)>;

  // Connects. With retry, returns even if the broker cannot be reached now (the link comes
  // up later: on_link). Errors: kInvalidArgument (a bad URL list); kIoError: no server could
  // be reached (the message says, per URL, what a connection met: refused, no answer within
  // the timeout, a name not resolved...) or a server refused the credentials (its reason).
  // Later errors say what happened too: no answer within N ms, the link down, nobody
  // listening; on_link names the server lost or reached.
  static Result<std::unique_ptr<Broker>> connect(const BrokerOptions& options);
  ~Broker();

  bool connected() const;
  Status publish(const std::string& subject, const std::string& data,
                 const std::string& reply = "");
  // Subscribes for the broker's lifetime.
  Status subscribe(const std::string& subject, Handler handler);
  // One answer. Errors: kIoError (no answer within timeout_ms, or the link is down).
  Result<std::string> request(const std::string& subject, const std::string& data, int timeout_ms);
  // Publishes data with a private reply subject and gathers answers until `expect` arrived
  // (0: any number) or timeout_ms passed since the publish.
  Result<std::vector<std::string>> gather(const std::string& subject, const std::string& data,
                                          size_t expect, int timeout_ms);
  // As gather, handing each answer to on_answer as it arrives, until on_answer returns true
  // (enough) or timeout_ms passed since the publish.
  Status gather_each(const std::string& subject, const std::string& data, int timeout_ms,
                     const std::function<bool(std::string&& answer)>& on_answer);
  // Waits until what was published has reached the server.
  Status flush(int timeout_ms);

  struct Impl;

 private:
  explicit Broker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanotrace::fleet
