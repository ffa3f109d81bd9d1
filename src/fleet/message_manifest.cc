// A round's manifest (message_manifest.hpp): written by the agent, read by collectors.
#include "fleet/message_manifest.hpp"

#include <nlohmann/json.hpp>

#include "fleet/message_fields.hpp"
#include "fleet/spool.hpp"

namespace nanotrace::fleet {

using nlohmann::json;
using Need = FieldReader::Need;

json RoundTiming::json_value() const {
  json j = json::object();
  auto put = [&](const char* key, uint64_t ns) {
    if (ns != 0) j[key] = ns;
  };
  put("woke_ns", woke_ns);
  put("seen_ns", seen_ns);
  put("published_ns", published_ns);
  put("received_ns", received_ns);
  put("handled_ns", handled_ns);
  put("requested_ns", requested_ns);
  put("copied_ns", copied_ns);
  return j;
}

void RoundTiming::read(FieldReader& r) {
  r.u64("woke_ns", &woke_ns, Need::kOptional);
  r.u64("seen_ns", &seen_ns, Need::kOptional);
  r.u64("published_ns", &published_ns, Need::kOptional);
  r.u64("received_ns", &received_ns, Need::kOptional);
  r.u64("handled_ns", &handled_ns, Need::kOptional);
  r.u64("requested_ns", &requested_ns, Need::kOptional);
  r.u64("copied_ns", &copied_ns, Need::kOptional);
}

json ManifestProcess::json_value() const {
  json j = {{"pid", pid}};
  // A process found not frozen is named by its pid alone; a snapshot, even one that failed,
  // by everything the agent knew of it.
  if (!file.empty()) {
    j["name"] = name;
    j["file"] = file;
    j["frozen_realtime_ns"] = frozen_realtime_ns;
    j["history_seconds"] = history_seconds;
    if (error.empty()) {
      j["bytes"] = bytes;
      j["records"] = records;
      if (has_kernel) {
        j["kernel_pages"] = kernel_pages;
        j["kernel_lost"] = kernel_lost;
      }
    }
  }
  if (!error.empty()) j["error"] = error;
  return j;
}

void ManifestProcess::read(FieldReader& r) {
  r.u32("pid", &pid);
  r.text("name", &name, kMaxNameBytes, Need::kOptional);
  r.text("file", &file, kMaxNameBytes, Need::kOptional);
  if (r.ok() && !file.empty() && !valid_spool_name(file)) {
    r.fail("file", "not a spool file name");
  }
  r.u64("frozen_realtime_ns", &frozen_realtime_ns, Need::kOptional);
  r.real("history_seconds", &history_seconds, Need::kOptional);
  r.u64("bytes", &bytes, Need::kOptional);
  r.u64("records", &records, Need::kOptional);
  has_kernel = r.has("kernel_pages");
  r.u64("kernel_pages", &kernel_pages, Need::kOptional);
  r.u64("kernel_lost", &kernel_lost, Need::kOptional);
  r.text("error", &error, kMaxTextBytes, Need::kOptional);
}

bool Manifest::names_round(const std::string& id) const {
  if (round == id) return true;
  for (const Freeze& o : origins) {
    if (o.round == id) return true;
  }
  return false;
}

uint64_t Manifest::match_realtime_ns() const {
  return origins.empty() ? 0 : origins.front().match_realtime_ns;
}

json Manifest::json_value() const {
  json origin_list = json::array();
  for (const Freeze& f : origins) origin_list.push_back(f.json_value());
  json process_list = json::array();
  for (const ManifestProcess& p : processes) process_list.push_back(p.json_value());
  json j = {{"round", round},           {"node", node},
            {"fleet", fleet},           {"origins", std::move(origin_list)},
            {"before_ns", before_ns},   {"freeze_realtime_ns", freeze_realtime_ns},
            {"latency_ns", latency_ns}, {"processes", std::move(process_list)}};
  if (timing) j["timing"] = timing->json_value();
  return j;
}

std::string Manifest::to_json(int indent) const { return json_text(json_value(), indent); }

void Manifest::read(FieldReader& r) {
  r.text("round", &round, kMaxNameBytes);
  if (r.ok() && !valid_spool_name(round)) r.fail("round", "not a spool file name");
  r.name("node", &node);
  r.name("fleet", &fleet);
  r.objects("origins", &origins);
  r.u64("before_ns", &before_ns);
  r.u64("freeze_realtime_ns", &freeze_realtime_ns);
  r.u64("latency_ns", &latency_ns);
  r.objects("processes", &processes);
  RoundTiming t;
  bool present = false;
  r.object("timing", &t, &present, Need::kOptional);
  if (present) timing = t;
}

Result<Manifest> Manifest::parse(const std::string& text) {
  auto j = parse_message_object(text);
  if (!j.ok()) return Status::Corrupt("manifest: " + j.status().message());
  Manifest m;
  FieldReader r(*j);
  m.read(r);
  if (!r.ok()) return r.status("manifest");
  return m;
}

}  // namespace nanotrace::fleet
