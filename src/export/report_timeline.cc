// Timelines of the HTML report: records and pairs aggregated per row and pixel column, drawn
// as SVG bars with hover texts (see report_timeline.hpp).
#include "export/report_timeline.hpp"

#include <algorithm>
#include <cmath>

#include "export/report_text.hpp"

namespace nanotrace::report {
namespace {

constexpr double kRecordsLane = 16, kPairsLane = 10, kRowGap = 4, kAxis = 30;

// Bar height for value v of a lane whose largest value is max: logarithmic, so that one
// record next to a column of thousands still shows.
double bar_height(uint64_t v, uint64_t max, double lane) {
  constexpr double kMin = 3;
  if (max <= 1) return lane;
  double f = std::log1p(static_cast<double>(v)) / std::log1p(static_cast<double>(max));
  return kMin + (lane - kMin) * std::min(1.0, f);
}

std::string record_sample(const Record& r, const TimelineContext& ctx) {
  if (r.event->is_kernel) {
    return fmt::format("{} ns, kernel, cpu {}, task {}, {}: {}", r.time_ns, r.cpu, r.task,
                       html(r.event->full_name(), 64), html(format_fields(r), kSampleBytes));
  }
  uint32_t tid = r.thread < ctx.threads->size() ? (*ctx.threads)[r.thread].info.tid : 0;
  return fmt::format("{} ns, tid {}, {}: {}", r.time_ns, tid, html(r.event->full_name(), 64),
                     html(format_fields(r), kSampleBytes));
}

}  // namespace

RowSet RowSet::by_thread(const std::vector<ThreadStats>& threads,
                         const std::vector<uint64_t>& records_per_thread, size_t max_rows) {
  std::vector<uint32_t> order;
  for (uint32_t t = 0; t < threads.size(); ++t) order.push_back(t);
  auto records = [&](uint32_t t) {
    return t < records_per_thread.size() ? records_per_thread[t] : uint64_t{0};
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return records(a) > records(b); });
  if (order.size() > max_rows) order.resize(max_rows);
  std::sort(order.begin(), order.end());  // the reader's order, among the rows kept
  RowSet s;
  s.thread_row_.assign(threads.size(), UINT32_MAX);
  for (uint32_t t : order) {
    s.thread_row_[t] = static_cast<uint32_t>(s.labels_.size());
    const ThreadInfo& info = threads[t].info;
    s.labels_.push_back(info.kernel ? fmt::format("kernel {}", info.name)
                                    : fmt::format("{} {}", info.tid, info.name));
  }
  size_t others = threads.size() - order.size();
  s.labels_.push_back(fmt::format("{} other thread{}", others, others == 1 ? "" : "s"));
  for (uint32_t& row : s.thread_row_) {
    if (row == UINT32_MAX) row = s.shared_row();
  }
  return s;
}

Timeline::Timeline(std::string id, uint64_t begin_ns, uint64_t end_ns, size_t rows, bool pairs_lane)
    : id_(std::move(id)),
      begin_ns_(begin_ns),
      end_ns_(std::max(end_ns, begin_ns + 1)),
      pairs_lane_(pairs_lane),
      record_cells_(rows * kColumns),
      pair_cells_(pairs_lane ? rows * kColumns : 0) {}

uint32_t Timeline::column(uint64_t t) const {
  t = std::clamp(t, begin_ns_, end_ns_ - 1);
  return static_cast<uint32_t>(static_cast<unsigned __int128>(t - begin_ns_) * kColumns /
                               (end_ns_ - begin_ns_));
}

uint64_t Timeline::column_begin(uint32_t c) const {
  // The first nanosecond whose column is c.
  unsigned __int128 span = end_ns_ - begin_ns_;
  return begin_ns_ + static_cast<uint64_t>((span * c + kColumns - 1) / kColumns);
}

void Timeline::add_record(uint32_t row, const Record& r, const TimelineContext& ctx) {
  RecordCell& c = record_cells_[size_t{row} * kColumns + column(r.time_ns)];
  ++records_;
  if (c.records++ == 0) {
    c.first = static_cast<uint32_t>(samples_.size());
    samples_.push_back(record_sample(r, ctx));
  }
  max_records_ = std::max(max_records_, c.records);
  const uint32_t slot = ctx.slot_of(*r.event);
  if (slot > UINT16_MAX) {
    ++c.other_records;
    return;
  }
  const auto id = static_cast<uint16_t>(slot);
  for (size_t k = 0; k < c.event.size(); ++k) {
    if (c.event_records[k] == 0) c.event[k] = id;
    if (c.event[k] == id) {
      ++c.event_records[k];
      return;
    }
  }
  ++c.other_records;
}

void Timeline::add_pair(uint32_t row, uint32_t rule, const Interval& interval, const Record& end,
                        const TimelineContext& ctx) {
  if (!pairs_lane_ || interval.end_ns < begin_ns_ || interval.begin_ns >= end_ns_) return;
  ++pairs_;
  const uint64_t latency = interval.latency_ns();
  max_latency_ns_ = std::max(max_latency_ns_, latency);
  uint32_t sample = kNoSample;
  PairCell* cells = &pair_cells_[size_t{row} * kColumns];
  for (uint32_t c = column(interval.begin_ns), last = column(interval.end_ns); c <= last; ++c) {
    PairCell& cell = cells[c];
    if (cell.pairs++ > 0 && latency <= cell.max_latency_ns) continue;
    if (sample == kNoSample) {
      // Written once per pair, and only for a pair that is the slowest of some column.
      auto tid = [&](uint32_t t) {
        return t < ctx.threads->size() ? (*ctx.threads)[t].info.tid : 0;
      };
      sample = static_cast<uint32_t>(samples_.size());
      samples_.push_back(fmt::format(
          "{}: {} from {} ns (tid {}) to {} ns (tid {})\nend record {}: {}",
          html((*ctx.rules)[rule].rule.label(), kSampleBytes), duration(latency), interval.begin_ns,
          tid(interval.begin_thread), interval.end_ns, tid(interval.end_thread),
          html(end.event->full_name(), 64), html(format_fields(end), kSampleBytes)));
    }
    cell.max_latency_ns = latency;
    cell.slowest = sample;
    cell.rule = rule;
  }
}

void Timeline::render_records(fmt::memory_buffer& out, size_t row, double y, double h,
                              const TimelineContext& ctx) const {
  auto it = std::back_inserter(out);
  const RecordCell* cells = &record_cells_[row * kColumns];
  for (uint32_t c = 0; c < kColumns; ++c) {
    const RecordCell& cell = cells[c];
    if (cell.records == 0) continue;
    size_t top = 0;
    for (size_t k = 1; k < cell.event.size(); ++k) {
      if (cell.event_records[k] > cell.event_records[top]) top = k;
    }
    double bh = bar_height(cell.records, max_records_, h);
    const uint16_t ev = cell.event[top];
    int color = ev < ctx.event_color.size() ? ctx.event_color[ev] : -1;
    fmt::format_to(it,
                   "<rect class=\"rec\" data-n=\"{}\" x=\"{}\" y=\"{:.1f}\" width=\"1\" "
                   "height=\"{:.1f}\" fill=\"{}\"><title>{} record{} in [{}, {}) ns\n",
                   cell.records, kLabelWidth + c, y + h - bh, bh, event_color(color), cell.records,
                   cell.records == 1 ? "" : "s", column_begin(c), column_begin(c + 1));
    const char* sep = "";
    for (size_t k = 0; k < cell.event.size() && cell.event_records[k] > 0; ++k) {
      const uint16_t id = cell.event[k];
      fmt::format_to(it, "{}{} {}", sep, id < ctx.event_name.size() ? ctx.event_name[id] : "?",
                     cell.event_records[k]);
      sep = ", ";
    }
    if (cell.other_records > 0) fmt::format_to(it, "{}other events {}", sep, cell.other_records);
    fmt::format_to(it, "\nfirst: {}</title></rect>", samples_[cell.first]);
  }
}

void Timeline::render_pairs(fmt::memory_buffer& out, size_t row, double y, double h) const {
  auto it = std::back_inserter(out);
  const PairCell* cells = &pair_cells_[row * kColumns];
  for (uint32_t c = 0; c < kColumns;) {
    const PairCell& cell = cells[c];
    if (cell.pairs == 0) {
      ++c;
      continue;
    }
    // A run of columns showing the same pairs (a long pair alone) is one bar.
    uint32_t end = c + 1;
    while (end < kColumns && cells[end].pairs == cell.pairs && cells[end].slowest == cell.slowest)
      ++end;
    double bh = bar_height(cell.max_latency_ns, max_latency_ns_, h);
    fmt::format_to(it,
                   "<rect class=\"pair\" data-n=\"{}\" data-max-ns=\"{}\" x=\"{}\" "
                   "y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" fill=\"{}\"><title>{} pair{} "
                   "over [{}, {}) ns{}; slowest: {}</title></rect>",
                   cell.pairs, cell.max_latency_ns, kLabelWidth + c, y + h - bh, end - c, bh,
                   rule_color(cell.rule), cell.pairs, cell.pairs == 1 ? "" : "s", column_begin(c),
                   column_begin(end), end - c > 1 ? " (each column)" : "", samples_[cell.slowest]);
    c = end;
  }
}

void Timeline::render(fmt::memory_buffer& out, const RowSet& rows, const TimelineContext& ctx,
                      uint64_t highlight_begin, uint64_t highlight_end) const {
  auto it = std::back_inserter(out);
  // Rows drawn: every row but an empty shared one.
  std::vector<size_t> drawn;
  for (size_t r = 0; r < rows.size(); ++r) {
    bool empty = true;
    for (uint32_t c = 0; c < kColumns && empty; ++c) {
      empty = record_cells_[r * kColumns + c].records == 0 &&
              (!pairs_lane_ || pair_cells_[r * kColumns + c].pairs == 0);
    }
    if (r != rows.shared_row() || !empty) drawn.push_back(r);
  }
  const double pitch = kRecordsLane + (pairs_lane_ ? kPairsLane + 1 : 0) + kRowGap;
  const double height = static_cast<double>(drawn.size()) * pitch + kAxis;
  const uint64_t span = end_ns_ - begin_ns_;
  fmt::format_to(it,
                 "<svg class=\"timeline\" id=\"{}\" data-records=\"{}\" "
                 "data-pairs=\"{}\" data-begin-ns=\"{}\" data-end-ns=\"{}\" "
                 "data-columns=\"{}\" width=\"{}\" height=\"{}\">",
                 id_, records_, pairs_, begin_ns_, end_ns_, kColumns, kLabelWidth + kColumns + 40,
                 height);
  for (size_t i = 0; i < drawn.size(); ++i) {
    const double y = static_cast<double>(i) * pitch;
    fmt::format_to(it,
                   "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>"
                   "<text x=\"4\" y=\"{}\">{}</text>",
                   kLabelWidth, y, kColumns, pitch - kRowGap, i % 2 ? "#f2f2f2" : "#f8f8f8",
                   y + kRecordsLane - 3, html(rows.label(static_cast<uint32_t>(drawn[i])), 28));
  }
  for (int i = 0; i <= 10; ++i) {
    double x = kLabelWidth + kColumns * i / 10.0;
    fmt::format_to(it,
                   "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"0\" y2=\"{1}\" stroke=\"#ddd\"/>"
                   "<text x=\"{0:.1f}\" y=\"{2}\" text-anchor=\"middle\">+{3}</text>",
                   x, height - kAxis + 4, height - 10, duration(span * i / 10));
  }
  for (size_t i = 0; i < drawn.size(); ++i) {
    const double y = static_cast<double>(i) * pitch;
    render_records(out, drawn[i], y, kRecordsLane, ctx);
    if (pairs_lane_) render_pairs(out, drawn[i], y + kRecordsLane + 1, kPairsLane);
  }
  if (highlight_end > highlight_begin) {
    double x0 = kLabelWidth + column(highlight_begin);
    double x1 = kLabelWidth + column(highlight_end - 1) + 1;
    fmt::format_to(it,
                   "<rect id=\"{}-highlight\" x=\"{}\" y=\"0\" width=\"{}\" height=\"{}\" "
                   "fill=\"none\" stroke=\"#e00\" stroke-width=\"1.5\"/>",
                   id_, x0 - 1, x1 - x0 + 2, height - kAxis + 2);
  }
  out.append(std::string_view("</svg>\n"));
}

}  // namespace nanotrace::report
