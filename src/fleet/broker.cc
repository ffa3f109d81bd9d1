// The NATS link of the fleet (broker.hpp), over libnats.
#include "fleet/broker.hpp"

#include <nats/nats.h>

#include <atomic>
#include <chrono>
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
  // The library calls back on its own threads, even while the connection closes: the
  // teardown stops new calls and waits for those running before freeing what they use.
  std::atomic<bool> closing{false};
  std::atomic<int> in_callback{0};

  bool enter() {
    in_callback.fetch_add(1, std::memory_order_acq_rel);
    if (!closing.load(std::memory_order_acquire)) return true;
    in_callback.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  void leave() { in_callback.fetch_sub(1, std::memory_order_acq_rel); }

  ~Impl() {
    closing.store(true, std::memory_order_release);
    for (natsSubscription* s : subscriptions) natsSubscription_Unsubscribe(s);
    if (connection != nullptr) natsConnection_Close(connection);
    while (in_callback.load(std::memory_order_acquire) != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (natsSubscription* s : subscriptions) natsSubscription_Destroy(s);
    if (connection != nullptr) natsConnection_Destroy(connection);
    if (options != nullptr) natsOptions_Destroy(options);
  }
};

namespace {

Status nats_error(const std::string& what, natsStatus s) {
  const char* last = nats_GetLastError(nullptr);
  std::string detail = last != nullptr && *last != '\0' ? last : natsStatus_GetText(s);
  return Status::IoError(what + ": " + detail);
}

std::string last_error(natsConnection* nc) {
  const char* text = nullptr;
  natsStatus s = natsConnection_GetLastError(nc, &text);
  if (text != nullptr && *text != '\0') return text;
  return s == NATS_OK ? std::string("no error") : natsStatus_GetText(s);
}

void link_changed(void* closure, bool up, const std::string& why) {
  auto* impl = static_cast<Broker::Impl*>(closure);
  if (!impl->enter()) return;
  if (impl->on_link) impl->on_link(up, why);
  impl->leave();
}

void on_disconnected(natsConnection* nc, void* closure) {
  link_changed(closure, false, last_error(nc));
}

void on_reconnected(natsConnection*, void* closure) { link_changed(closure, true, "reconnected"); }

void on_connected(natsConnection*, void* closure) { link_changed(closure, true, "connected"); }

void on_error(natsConnection* nc, natsSubscription*, natsStatus s, void* closure) {
  link_changed(closure, natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED,
               std::string(natsStatus_GetText(s)) + ": " + last_error(nc));
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
Broker::~Broker() = default;

Result<std::unique_ptr<Broker>> Broker::connect(const BrokerOptions& o) {
  auto impl = std::make_unique<Impl>();
  impl->on_link = o.on_link;
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s != NATS_OK) return nats_error("nats options", s);
  impl->options = opts;
  natsOptions_SetURL(opts, o.url.c_str());
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
  s = natsConnection_Connect(&impl->connection, opts);
  // An unreachable broker is waited for (with retry); one that refuses the credentials is an
  // error at once, whoever connects: retrying would only hide it.
  if (s == NATS_NO_SERVER && o.retry) {
    impl->connection = nullptr;
    natsOptions_SetRetryOnFailedConnect(opts, true, on_connected, impl.get());
    s = natsConnection_Connect(&impl->connection, opts);
  }
  if (s == NATS_NOT_YET_CONNECTED && o.retry) {
    if (o.on_link) o.on_link(false, "broker " + o.url + " not reachable yet; retrying");
  } else if (s != NATS_OK) {
    impl->connection = nullptr;
    return nats_error("cannot connect to " + o.url, s);
  } else if (o.on_link) {
    o.on_link(true, "connected");
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
  if (s != NATS_OK) return nats_error("request " + subject, s);
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

Status Broker::gather_each(const std::string& subject, const std::string& data, int timeout_ms,
                           const std::function<bool(std::string&& answer)>& on_answer) {
  natsInbox* inbox = nullptr;
  natsStatus s = natsInbox_Create(&inbox);
  if (s != NATS_OK) return nats_error("inbox", s);
  natsSubscription* sub = nullptr;
  s = natsConnection_SubscribeSync(&sub, impl_->connection, inbox);
  if (s == NATS_OK) {
    s = natsConnection_PublishRequest(impl_->connection, subject.c_str(), inbox, data.data(),
                                      static_cast<int>(data.size()));
  }
  if (s == NATS_OK) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (bool enough = false; !enough;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) break;
      natsMsg* msg = nullptr;
      natsStatus r = natsSubscription_NextMsg(&msg, sub, left);
      if (r == NATS_TIMEOUT) break;
      if (r != NATS_OK) {
        s = r;
        break;
      }
      const char* bytes = natsMsg_GetData(msg);  // an empty answer may have none
      std::string answer(bytes != nullptr ? bytes : "",
                         bytes != nullptr ? static_cast<size_t>(natsMsg_GetDataLength(msg)) : 0);
      natsMsg_Destroy(msg);
      enough = on_answer(std::move(answer));
    }
  }
  if (sub != nullptr) natsSubscription_Destroy(sub);
  natsInbox_Destroy(inbox);
  if (s != NATS_OK) return nats_error("request " + subject, s);
  return Status::Ok();
}

Status Broker::flush(int timeout_ms) {
  natsStatus s = natsConnection_FlushTimeout(impl_->connection, timeout_ms);
  if (s != NATS_OK) return nats_error("flush", s);
  return Status::Ok();
}

}  // namespace nanotrace::fleet
