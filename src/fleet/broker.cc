// The NATS link of the fleet (broker.hpp), over libnats.
#include "fleet/broker.hpp"

#include <fcntl.h>
#include <nats/nats.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

namespace nanotrace::fleet {

// A subscription's handler, and the broker it belongs to (for the teardown count).
struct Subscriber {
  Broker::Impl* impl;
  Broker::Handler handler;
};

struct Broker::Impl {
  natsOptions* options = nullptr;
  natsConnection* connection = nullptr;
  std::mutex mu;
  std::vector<natsSubscription*> subscriptions;
  std::vector<std::unique_ptr<Subscriber>> handlers;
  std::function<void(bool, const std::string&)> on_link;
  std::vector<std::string> urls;  // the servers given
  int timeout_ms = 2000;
  std::mutex url_mu;
  std::string current_url;  // the server connected to last; guarded by url_mu
  // The library calls back on its own threads, even while the connection closes: the
  // teardown stops new calls and waits for those running before freeing what they use. Its
  // connection callbacks (disconnected, closed...) come from one queue, in order, and the
  // closed one is the last: the teardown waits for it too, since a disconnected callback may
  // still be queued when natsConnection_Close returns.
  std::atomic<bool> closing{false};
  std::atomic<int> in_callback{0};
  std::mutex closed_mu;
  std::condition_variable closed_cv;
  bool closed = false;  // guarded by closed_mu
  bool shut = false;
  // One inbox subscription (<inbox>.*) for the gathers, made at the first: each ask replies to
  // <inbox>.<n>, and the answers of an ask that ended arrive to a subscription that lives on.
  // (A subscription destroyed per ask while late answers to it arrived crashed libnats's
  // reader thread.) One gather at a time uses it; another at the same time has its own.
  std::mutex gather_mu;
  std::string inbox;
  natsSubscription* inbox_subscription = nullptr;
  uint64_t asks = 0;

  bool enter() {
    in_callback.fetch_add(1, std::memory_order_acq_rel);
    if (!closing.load(std::memory_order_acquire)) return true;
    in_callback.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  void leave() { in_callback.fetch_sub(1, std::memory_order_acq_rel); }

  // Closes the connection and frees the library's objects. False if the library's closed
  // callback did not come (then a callback may still use this object: it must not be freed).
  bool shut_down() {
    if (shut) return true;
    shut = true;
    closing.store(true, std::memory_order_release);
    if (inbox_subscription != nullptr) natsSubscription_Unsubscribe(inbox_subscription);
    for (natsSubscription* s : subscriptions) natsSubscription_Unsubscribe(s);
    bool last_callback_came = true;
    if (connection != nullptr) {
      natsConnection_Close(connection);
      std::unique_lock lock(closed_mu);
      last_callback_came =
          closed_cv.wait_for(lock, std::chrono::seconds(10), [this] { return closed; });
    }
    while (in_callback.load(std::memory_order_acquire) != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (inbox_subscription != nullptr) natsSubscription_Destroy(inbox_subscription);
    for (natsSubscription* s : subscriptions) natsSubscription_Destroy(s);
    if (connection != nullptr) natsConnection_Destroy(connection);
    if (options != nullptr) natsOptions_Destroy(options);
    return last_callback_came;
  }
  ~Impl() { shut_down(); }
};

namespace {

// libnats's last error text without its "(file.c:line): " prefix.
std::string last_error_text(natsStatus s) {
  const char* last = nats_GetLastError(nullptr);
  std::string text = last != nullptr && *last != '\0' ? last : natsStatus_GetText(s);
  if (text.size() > 1 && text[0] == '(') {
    size_t end = text.find("): ");
    if (end != std::string::npos) text = text.substr(end + 3);
  }
  return text;
}

// A URL as messages show it: without a user and password it may carry.
std::string shown(const std::string& url) {
  size_t scheme = url.find("://");
  size_t from = scheme == std::string::npos ? 0 : scheme + 3;
  size_t at = url.find('@', from);
  if (at == std::string::npos || url.find('/', from) < at) return url;
  return url.substr(0, from) + url.substr(at + 1);
}

std::string join(const std::vector<std::string>& urls) {
  std::string out;
  for (const std::string& u : urls) out += (out.empty() ? "" : ", ") + shown(u);
  return out;
}

// What a TCP connection to the server of url meets within timeout_ms: libnats says only "no
// server available" when none answers, not why (refused, unreachable, not resolved...), which
// is what an operator needs to know.
std::string probe(const std::string& url, int timeout_ms) {
  std::string rest = url;
  size_t scheme = rest.find("://");
  if (scheme != std::string::npos) rest = rest.substr(scheme + 3);
  size_t at = rest.rfind('@');  // user:password@ is never shown
  if (at != std::string::npos) rest = rest.substr(at + 1);
  rest = rest.substr(0, rest.find('/'));
  std::string host = rest, port = "4222";
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    size_t close = rest.find(']');
    host = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    if (close != std::string::npos && close + 1 < rest.size() && rest[close + 1] == ':') {
      port = rest.substr(close + 2);
    }
  } else if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); e != 0) {
    return std::string("cannot resolve '") + host + "': " + gai_strerror(e);
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int r = ::connect(fd, a->ai_addr, a->ai_addrlen);
    int err = r == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, timeout_ms) == 1) {
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    ::close(fd);
    if (err == 0) {
      freeaddrinfo(found);
      return "accepts connections, but no NATS session came of it (not a NATS server, TLS "
             "asked, or it timed out)";
    }
    why = err == ETIMEDOUT ? "no answer within " + std::to_string(timeout_ms) + " ms"
                           : std::strerror(err);
  }
  freeaddrinfo(found);
  return why;
}

// Why none of the servers could be connected to: "URL: reason" for each (five at most, probed
// at once, so that servers that do not answer cost one timeout, not one each).
std::string diagnose(const std::vector<std::string>& urls, int timeout_ms) {
  const size_t n = std::min<size_t>(urls.size(), 5);
  std::vector<std::future<std::string>> probes;
  for (size_t i = 0; i < n; ++i) {
    probes.push_back(std::async(std::launch::async, probe, urls[i], timeout_ms));
  }
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += (out.empty() ? "" : "; ") + shown(urls[i]) + ": " + probes[i].get();
  }
  if (urls.size() > n) out += "; ...";
  return out;
}

// A failed call's status with what happened: the server's own reason (credentials refused),
// a connection that is down, or a timeout.
Status nats_error(const std::string& what, natsStatus s, int timeout_ms = 0) {
  switch (s) {
    case NATS_TIMEOUT:
      return Status::IoError(what + ": no answer within " + std::to_string(timeout_ms) + " ms");
    case NATS_NO_RESPONDERS:
      return Status::IoError(what + ": nobody listens on it");
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_NOT_YET_CONNECTED:
      return Status::IoError(what + ": the broker link is down (reconnecting)");
    default:
      return Status::IoError(what + ": " + last_error_text(s));
  }
}

std::string connected_url(natsConnection* nc) {
  char url[512] = {};
  if (natsConnection_GetConnectedUrl(nc, url, sizeof(url)) != NATS_OK) return "";
  return shown(url);
}

// The library's connection callbacks. Each enters the broker first: the teardown waits for
// those inside and stops new ones before freeing what they use.
void on_disconnected(natsConnection* nc, void* closure) {
  auto* impl = static_cast<Broker::Impl*>(closure);
  if (!impl->enter()) return;
  const char* text = nullptr;
  natsStatus s = natsConnection_GetLastError(nc, &text);
  std::string lost;
  {
    std::lock_guard lock(impl->url_mu);
    lost = impl->current_url;
  }
  std::string why = "lost " + (lost.empty() ? join(impl->urls) : lost);
  if (s != NATS_OK && text != nullptr && *text != '\0') {
    why += " (" + std::string(text) + ")";
  } else {
    why += " (the connection closed: the server stopped, or the network failed)";
  }
  if (natsConnection_Status(nc) == NATS_CONN_STATUS_RECONNECTING) {
    why += impl->urls.size() > 1 ? "; reconnecting to one of " + join(impl->urls)
                                 : "; reconnecting every 250 ms";
  }
  if (impl->on_link) impl->on_link(false, why);
  impl->leave();
}

void on_up(natsConnection* nc, void* closure, const char* how) {
  auto* impl = static_cast<Broker::Impl*>(closure);
  if (!impl->enter()) return;
  std::string url = connected_url(nc);
  {
    std::lock_guard lock(impl->url_mu);
    impl->current_url = url;
  }
  if (impl->on_link) impl->on_link(true, std::string(how) + " to " + url);
  impl->leave();
}

void on_reconnected(natsConnection* nc, void* closure) { on_up(nc, closure, "reconnected"); }

void on_connected(natsConnection* nc, void* closure) { on_up(nc, closure, "connected"); }

void on_closed(natsConnection*, void* closure) {
  auto* impl = static_cast<Broker::Impl*>(closure);
  std::lock_guard lock(impl->closed_mu);
  impl->closed = true;
  impl->closed_cv.notify_all();
}

void on_error(natsConnection* nc, natsSubscription*, natsStatus s, void* closure) {
  auto* impl = static_cast<Broker::Impl*>(closure);
  if (!impl->enter()) return;
  const char* text = nullptr;
  natsConnection_GetLastError(nc, &text);
  std::string why = natsStatus_GetText(s);
  if (text != nullptr && *text != '\0') why += std::string(": ") + text;
  if (impl->on_link) impl->on_link(natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED, why);
  impl->leave();
}

void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  auto* subscriber = static_cast<Subscriber*>(closure);
  if (!subscriber->impl->enter()) {
    natsMsg_Destroy(msg);
    return;
  }
  BrokerMessage m;
  m.subject = natsMsg_GetSubject(msg);
  const char* reply = natsMsg_GetReply(msg);
  if (reply != nullptr) m.reply = reply;
  m.data.assign(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg)));
  natsMsg_Destroy(msg);
  subscriber->handler(std::move(m));
  subscriber->impl->leave();
}

}  // namespace

Broker::Broker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Broker::~Broker() {
  // A callback that never came may still use the Impl: it is left allocated, not freed.
  if (impl_ != nullptr && !impl_->shut_down()) (void)impl_.release();
}

Result<std::unique_ptr<Broker>> Broker::connect(const BrokerOptions& o) {
  auto impl = std::make_unique<Impl>();
  impl->on_link = o.on_link;
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s != NATS_OK) return nats_error("nats options", s);
  impl->options = opts;
  for (size_t b = 0, e; b <= o.url.size(); b = e + 1) {
    e = o.url.find(',', b);
    if (e == std::string::npos) e = o.url.size();
    std::string one = o.url.substr(b, e - b);
    one.erase(0, one.find_first_not_of(" \t"));
    one.erase(one.find_last_not_of(" \t") + 1);
    if (one.empty()) return Status::Invalid("bad broker URL list: an empty entry between commas");
    impl->urls.push_back(one);
  }
  impl->timeout_ms = o.timeout_ms;
  std::vector<const char*> servers;
  for (const std::string& u : impl->urls) servers.push_back(u.c_str());
  s = natsOptions_SetServers(opts, servers.data(), static_cast<int>(servers.size()));
  if (s != NATS_OK) {
    return Status::Invalid("bad broker URL (" + join(impl->urls) + "): " + last_error_text(s));
  }
  if (!o.name.empty()) natsOptions_SetName(opts, o.name.c_str());
  if (!o.credentials.token.empty()) natsOptions_SetToken(opts, o.credentials.token.c_str());
  if (!o.credentials.user.empty()) {
    natsOptions_SetUserInfo(opts, o.credentials.user.c_str(), o.credentials.password.c_str());
  }
  natsOptions_SetTimeout(opts, o.timeout_ms);
  if (o.send_asap) natsOptions_SetSendAsap(opts, true);
  if (o.no_echo) natsOptions_SetNoEcho(opts, true);
  natsOptions_SetAllowReconnect(opts, true);
  natsOptions_SetMaxReconnect(opts, o.retry ? -1 : 5);
  natsOptions_SetReconnectWait(opts, 250);
  natsOptions_SetReconnectJitter(opts, 50, 0);
  natsOptions_SetReconnectBufSize(opts, 1 << 20);
  natsOptions_SetPingInterval(opts, 2000);
  natsOptions_SetMaxPingsOut(opts, 2);
  // Control messages are small and a snapshot's chunks are pulled one at a time: a large
  // pending limit only guards against a stuck handler.
  natsOptions_SetMaxPendingMsgs(opts, 65536);
  natsOptions_SetDisconnectedCB(opts, on_disconnected, impl.get());
  natsOptions_SetReconnectedCB(opts, on_reconnected, impl.get());
  natsOptions_SetErrorHandler(opts, on_error, impl.get());
  natsOptions_SetClosedCB(opts, on_closed, impl.get());
  s = natsConnection_Connect(&impl->connection, opts);
  // libnats says why a server that answered refused (credentials); of servers that did not
  // answer, only that none did.
  const bool unreachable = s == NATS_NO_SERVER || s == NATS_TIMEOUT || s == NATS_IO_ERROR;
  const std::string refused = s == NATS_OK || unreachable ? "" : last_error_text(s);
  const std::string why_not = unreachable ? diagnose(impl->urls, std::min(o.timeout_ms, 1000)) : "";
  // An unreachable broker is waited for (with retry); one that refuses the credentials is an
  // error at once, whoever connects: retrying would only hide it.
  if (unreachable && o.retry) {
    impl->connection = nullptr;
    natsOptions_SetRetryOnFailedConnect(opts, true, on_connected, impl.get());
    s = natsConnection_Connect(&impl->connection, opts);
  }
  if (s == NATS_NOT_YET_CONNECTED && o.retry) {
    if (o.on_link) o.on_link(false, "not reachable yet (" + why_not + "); retrying every 250 ms");
  } else if (s != NATS_OK) {
    impl->connection = nullptr;
    if (unreachable) return Status::IoError("cannot connect to " + why_not);
    return Status::IoError("the broker (" + join(impl->urls) + ") refused the connection: " +
                           (refused.empty() ? last_error_text(s) : refused));
  } else {
    std::string url = connected_url(impl->connection);
    {
      std::lock_guard lock(impl->url_mu);
      impl->current_url = url;
    }
    if (o.on_link) o.on_link(true, "connected to " + url);
  }
  return std::unique_ptr<Broker>(new Broker(std::move(impl)));
}

bool Broker::connected() const {
  return natsConnection_Status(impl_->connection) == NATS_CONN_STATUS_CONNECTED;
}

Status Broker::publish(const std::string& subject, const std::string& data,
                       const std::string& reply) {
  natsStatus s = reply.empty() ? natsConnection_Publish(impl_->connection, subject.c_str(),
                                                        data.data(), static_cast<int>(data.size()))
                               : natsConnection_PublishRequest(impl_->connection, subject.c_str(),
                                                               reply.c_str(), data.data(),
                                                               static_cast<int>(data.size()));
  if (s != NATS_OK) return nats_error("publish " + subject, s);
  return Status::Ok();
}

Status Broker::subscribe(const std::string& subject, Handler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->handlers.push_back(
      std::make_unique<Subscriber>(Subscriber{impl_.get(), std::move(handler)}));
  natsSubscription* sub = nullptr;
  natsStatus s = natsConnection_Subscribe(&sub, impl_->connection, subject.c_str(), on_message,
                                          impl_->handlers.back().get());
  if (s != NATS_OK) return nats_error("subscribe " + subject, s);
  natsSubscription_SetPendingLimits(sub, 65536, 256 << 20);
  impl_->subscriptions.push_back(sub);
  return Status::Ok();
}

Result<std::string> Broker::request(const std::string& subject, const std::string& data,
                                    int timeout_ms) {
  natsMsg* reply = nullptr;
  natsStatus s = natsConnection_Request(&reply, impl_->connection, subject.c_str(), data.data(),
                                        static_cast<int>(data.size()), timeout_ms);
  if (s != NATS_OK) return nats_error("request " + subject, s, timeout_ms);
  std::string out(natsMsg_GetData(reply), static_cast<size_t>(natsMsg_GetDataLength(reply)));
  natsMsg_Destroy(reply);
  return out;
}

Result<std::vector<std::string>> Broker::gather(const std::string& subject, const std::string& data,
                                                size_t expect, int timeout_ms) {
  std::vector<std::string> answers;
  Status s = gather_each(subject, data, timeout_ms, [&](std::string&& answer) {
    answers.push_back(std::move(answer));
    return expect != 0 && answers.size() >= expect;
  });
  if (!s.ok()) return s;
  return answers;
}

namespace {

// Answers from sub until on_answer has enough or the deadline passes; a message to another
// subject than `reply` (an earlier ask's late answer) is dropped.
natsStatus collect(natsSubscription* sub, const std::string& reply,
                   std::chrono::steady_clock::time_point deadline,
                   const std::function<bool(std::string&& answer)>& on_answer) {
  for (bool enough = false; !enough;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return NATS_OK;
    natsMsg* msg = nullptr;
    natsStatus r = natsSubscription_NextMsg(&msg, sub, left);
    if (r == NATS_TIMEOUT) return NATS_OK;
    if (r != NATS_OK) return r;
    if (reply != natsMsg_GetSubject(msg)) {
      natsMsg_Destroy(msg);
      continue;
    }
    const char* bytes = natsMsg_GetData(msg);  // an empty answer may have none
    std::string answer(bytes != nullptr ? bytes : "",
                       bytes != nullptr ? static_cast<size_t>(natsMsg_GetDataLength(msg)) : 0);
    natsMsg_Destroy(msg);
    enough = on_answer(std::move(answer));
  }
  return NATS_OK;
}

}  // namespace

Status Broker::gather_each(const std::string& subject, const std::string& data, int timeout_ms,
                           const std::function<bool(std::string&& answer)>& on_answer) {
  std::unique_lock shared(impl_->gather_mu, std::try_to_lock);
  natsStatus s = NATS_OK;
  std::string reply;
  natsSubscription* own = nullptr;  // when another gather holds the shared inbox
  natsInbox* inbox = nullptr;
  if (shared.owns_lock() && impl_->inbox_subscription == nullptr) {
    s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
      impl_->inbox = inbox;
      natsInbox_Destroy(inbox);
      inbox = nullptr;
      s = natsConnection_SubscribeSync(&impl_->inbox_subscription, impl_->connection,
                                       (impl_->inbox + ".*").c_str());
    }
    if (s != NATS_OK) impl_->inbox_subscription = nullptr;
  }
  if (s == NATS_OK && shared.owns_lock()) {
    reply = impl_->inbox + "." + std::to_string(++impl_->asks);
  } else if (s == NATS_OK) {
    s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
      reply = inbox;
      s = natsConnection_SubscribeSync(&own, impl_->connection, reply.c_str());
    }
  }
  if (s == NATS_OK) {
    s = natsConnection_PublishRequest(impl_->connection, subject.c_str(), reply.c_str(),
                                      data.data(), static_cast<int>(data.size()));
  }
  if (s == NATS_OK) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    s = collect(own != nullptr ? own : impl_->inbox_subscription, reply, deadline, on_answer);
  }
  if (own != nullptr) natsSubscription_Destroy(own);
  if (inbox != nullptr) natsInbox_Destroy(inbox);
  if (s != NATS_OK) return nats_error("request " + subject, s, timeout_ms);
  return Status::Ok();
}

Status Broker::flush(int timeout_ms) {
  natsStatus s = natsConnection_FlushTimeout(impl_->connection, timeout_ms);
  if (s != NATS_OK) return nats_error("the broker's confirmation", s, timeout_ms);
  return Status::Ok();
}

}  // namespace nanotrace::fleet
