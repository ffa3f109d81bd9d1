// The agent's freeze announcements, repeated for a while. NATS delivers a message at most once,
// to the connections that are up when a server forwards it: a node whose server of the cluster
// died with the announcement in it, or whose link was down at that moment, would never learn of
// the freeze. So the origin repeats its announcement every `every_ns` until `repeat_for_ns`
// after it first made it, and at once when its own link comes back (its server was the one
// that died). Every agent acts on the first copy of a round only (rounds are known by their
// id), so a copy costs a receiver a parse and a look-up. A freeze that no server confirmed in
// all that time (a flush after one of its publishes) reached no node: its node froze alone.
//
// AnnouncementSchedule decides what is due on the caller's clock (tested alone); Announcer
// runs it on a thread of its own, so a repeat waits neither for a copy nor for the watcher.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nanotrace/status.hpp"

namespace nanotrace::fleet {

class AnnouncementSchedule {
 public:
  struct Due {
    std::string round;
    std::string text;
  };
  struct Expired {
    std::string round;
    bool reached = false;  // a copy was confirmed by a server
    uint32_t sent = 0;     // copies published
  };

  AnnouncementSchedule(uint64_t repeat_for_ns, uint64_t every_ns)
      : repeat_for_ns_(repeat_for_ns), every_ns_(every_ns) {}

  // A freeze announced at now_ns (`confirmed`: a server has it).
  void add(const std::string& round, const std::string& text, bool confirmed, uint64_t now_ns);
  // The link came back: every announcement still pending is due at once.
  void link_up(uint64_t now_ns);
  // The announcements due at now_ns (each then waits every_ns for its next copy).
  std::vector<Due> due(uint64_t now_ns);
  // A copy of round was published; `confirmed`: a server confirmed it.
  void sent(const std::string& round, bool confirmed);
  // Removes the announcements whose time ran out by now_ns.
  std::vector<Expired> expire(uint64_t now_ns);
  // When something is next due or expires (UINT64_MAX: nothing pending).
  uint64_t next_ns() const;
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    std::string round, text;
    uint64_t until_ns = 0, next_ns = 0;
    bool reached = false;
    uint32_t sent = 0;
  };
  uint64_t repeat_for_ns_, every_ns_;
  std::vector<Pending> pending_;
};

class Announcer {
 public:
  struct Hooks {
    std::function<bool()> connected;
    // Publishes a copy and waits (briefly) for the server to confirm it.
    std::function<Status(const std::string& text)> publish;
    // An announcement's time ran out (on the announcer's thread).
    std::function<void(const AnnouncementSchedule::Expired&)> expired;
  };
  Announcer(uint64_t repeat_for_ns, uint64_t every_ns, Hooks hooks);
  ~Announcer();  // stop()
  // Stops the thread (no hook runs after it returns); what is pending is dropped. add() and
  // link_up() stay callable (a broker callback may still come).
  void stop();

  void add(const std::string& round, const std::string& text, bool confirmed);
  void link_up();

 private:
  void loop();
  Hooks hooks_;
  std::mutex mu_;
  std::condition_variable cv_;
  AnnouncementSchedule schedule_;  // guarded by mu_
  bool stop_ = false;              // guarded by mu_
  std::thread thread_;
};

}  // namespace nanotrace::fleet
