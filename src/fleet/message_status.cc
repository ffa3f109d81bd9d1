// A node's answer to `fleet status` (message_status.hpp).
#include "fleet/message_status.hpp"

#include <nlohmann/json.hpp>

#include "fleet/message_answers.hpp"
#include "fleet/message_fields.hpp"

namespace nanotrace::fleet {

using nlohmann::json;
using Need = FieldReader::Need;

json ProcessStatus::json_value() const {
  return {{"pid", pid},
          {"name", name},
          {"trigger", trigger},
          {"expression", expression},
          {"threads", threads},
          {"records", records},
          {"history_seconds", history_seconds},
          {"overwritten_bytes", overwritten_bytes},
          {"lost", lost}};
}

void ProcessStatus::read(FieldReader& r) {
  r.u32("pid", &pid);
  r.text("name", &name, kMaxNameBytes);
  r.text("trigger", &trigger, kMaxNameBytes);
  r.text("expression", &expression, kMaxTextBytes);
  r.u64("threads", &threads);
  r.u64("records", &records);
  r.real("history_seconds", &history_seconds);
  r.u64("overwritten_bytes", &overwritten_bytes);
  r.u64("lost", &lost);
}

json ClockStatus::json_value() const {
  return {{"source", source},
          {"synchronised", synchronised},
          {"offset_ns", offset_ns},
          {"bound_ns", bound_known ? json(bound_ns) : json(nullptr)},
          {"reference", reference}};
}

void ClockStatus::read(FieldReader& r) {
  r.text("source", &source, kMaxNameBytes);
  r.boolean("synchronised", &synchronised);
  r.i64("offset_ns", &offset_ns);
  r.u64_or_null("bound_ns", &bound_ns, &bound_known);
  r.text("reference", &reference, kMaxNameBytes);
}

json KernelStatus::json_value() const {
  return {{"groups", groups}, {"instance", instance}, {"error", error}};
}

void KernelStatus::read(FieldReader& r) {
  r.texts("groups", &groups, kMaxNameBytes);
  r.text("instance", &instance, kMaxNameBytes);
  r.text("error", &error, kMaxTextBytes);
}

json ShipStatus::json_value() const {
  return {{"servers", servers},
          {"database", database},
          {"shipped", shipped},
          {"already_stored", already_stored},
          {"events", events},
          {"failures", failures},
          {"rejected", rejected},
          {"queued", queued},
          {"last_error", last_error},
          {"last_error_realtime_ns", last_error_realtime_ns},
          {"last_success_realtime_ns", last_success_realtime_ns}};
}

void ShipStatus::read(FieldReader& r) {
  r.u64("servers", &servers);
  r.text("database", &database, kMaxNameBytes);
  r.u64("shipped", &shipped);
  r.u64("already_stored", &already_stored);
  r.u64("events", &events);
  r.u64("failures", &failures);
  r.u64("rejected", &rejected);
  r.u64("queued", &queued);
  r.text("last_error", &last_error, kMaxTextBytes);
  r.u64("last_error_realtime_ns", &last_error_realtime_ns);
  r.u64("last_success_realtime_ns", &last_success_realtime_ns);
}

json StatusAnswer::json_value() const {
  if (!error.empty()) return error_answer_json(node, error);
  json process_list = json::array();
  for (const ProcessStatus& p : processes) process_list.push_back(p.json_value());
  json j = {{"node", node},
            {"connected", connected},
            {"processes", std::move(process_list)},
            {"armed", armed},
            {"before_ns", before_ns},
            {"rate_ns", rate_ns},
            {"rounds", rounds},
            {"coalesced", coalesced},
            {"rate_limited", rate_limited},
            {"local_only", local_only},
            {"last_latency_ns", last_latency_ns}};
  if (clock) j["clock"] = clock->json_value();
  if (kernel) j["kernel"] = kernel->json_value();
  if (ship) j["ship"] = ship->json_value();
  return j;
}

std::string StatusAnswer::to_json() const { return json_text(json_value()); }

void StatusAnswer::read(FieldReader& r) {
  if (!read_answer_head(r, &node, &error)) return;
  r.boolean("connected", &connected);
  r.objects("processes", &processes);
  r.text("armed", &armed, kMaxTextBytes);
  r.u64("before_ns", &before_ns);
  r.u64("rate_ns", &rate_ns);
  r.u64("rounds", &rounds);
  r.u64("coalesced", &coalesced);
  r.u64("rate_limited", &rate_limited);
  r.u64("local_only", &local_only);
  r.u64("last_latency_ns", &last_latency_ns);
  bool present = false;
  ClockStatus c;
  r.object("clock", &c, &present, Need::kOptional);
  if (present) clock = c;
  KernelStatus k;
  r.object("kernel", &k, &present, Need::kOptional);
  if (present) kernel = k;
  ShipStatus s;
  r.object("ship", &s, &present, Need::kOptional);
  if (present) ship = s;
}

Result<StatusAnswer> StatusAnswer::parse(const std::string& text) {
  return parse_answer<StatusAnswer>(text, "status answer");
}

}  // namespace nanotrace::fleet
