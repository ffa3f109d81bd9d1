// Timing a tracer's first event on new threads and its per-event tail, whatever the tracer:
// what hiccups.cc (nanotrace) and tail_twin.cc (nanotrace and LTTng-UST side by side) share.
// A Probe says how to trace:
//
//   struct Probe {
//     void first(uint64_t thread);           // a new thread's first event
//     void event(uint64_t a, uint64_t b);    // one event of the per-event loop
//     void attach();                         // on the pinned thread, after its first event
//     uint64_t head() const;                 // the thread's ring position in bytes, or 0
//     uint64_t block = 0, ring = 0;          // block and ring bytes, or 0 when unknown
//   };
//
// With block and ring known, samples that started a new block or wrote the ring's first lap
// are reported apart from the others; without, every sample is a normal one (a tracer's
// sub-buffer switches are then in its tail).
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "spawn_timing.hpp"

namespace bench {

inline uint64_t ticks() {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

// TSC ticks per nanosecond, measured over `ms` milliseconds.
inline double ticks_per_ns(int ms) {
  uint64_t t0 = ticks(), n0 = now_ns();
  usleep(ms * 1000);
  uint64_t t1 = ticks(), n1 = now_ns();
  return static_cast<double>(t1 - t0) / static_cast<double>(n1 - n0);
}

inline long thread_switches() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

inline long thread_page_faults() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt + ru.ru_majflt;
}

// A fixed amount of work (a chain of dependent multiplications): the baseline that each new
// thread also times, so the machine's own outliers (interrupts, a hypervisor taking the vCPU
// away, which no context switch count shows) are seen beside the first events'.
inline uint64_t spin(uint64_t rounds) {
  uint64_t x = rounds | 1;
  for (uint64_t i = 0; i < rounds; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

inline void pin_to_last_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(std::max(0L, sysconf(_SC_NPROCESSORS_ONLN) - 1), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// The first event of each of `threads` new threads, started one at a time. Every first event
// is kept in the figures; those during which the thread was switched out are also counted,
// and the maximum of the others given apart, so that what the tracer costs is told from what
// a loaded machine's scheduler adds. Page faults are counted per first event, and the five
// slowest are listed with what their threads saw meanwhile.
template <class Probe>
nlohmann::json first_events(Probe& probe, int threads, double tpn) {
  std::vector<uint64_t> cost, not_preempted, baseline, faulted_cost, unfaulted_cost;
  std::vector<long> faults;
  struct Sample {
    uint64_t ticks;
    long faults, switches;
    int thread;  // the how-manieth new thread
  };
  std::vector<Sample> slowest;
  cost.reserve(threads);
  // About as long as a first event: 5 us of spinning.
  uint64_t spin_rounds = 1000;
  for (int i = 0; i < 20; ++i) {
    uint64_t t0 = ticks();
    __asm__ volatile("" : : "r"(spin(spin_rounds)));
    double us = static_cast<double>(ticks() - t0) / tpn / 1e3;
    if (us > 0) spin_rounds = std::max<uint64_t>(1, static_cast<uint64_t>(spin_rounds * 5.0 / us));
  }
  for (int i = 0; i < threads; ++i) {
    uint64_t c = 0, b = 0;
    long switched = 0, faulted = 0;
    std::thread([&, i] {
      uint64_t t0 = ticks();
      __asm__ volatile("" : : "r"(spin(spin_rounds)));
      b = ticks() - t0;
      long s0 = thread_switches(), f0 = thread_page_faults();
      t0 = ticks();
      probe.first(static_cast<uint64_t>(i));
      c = ticks() - t0;
      switched = thread_switches() - s0;
      faulted = thread_page_faults() - f0;
    }).join();
    cost.push_back(c);
    baseline.push_back(b);
    faults.push_back(faulted);
    if (switched == 0) not_preempted.push_back(c);
    (faulted != 0 ? faulted_cost : unfaulted_cost).push_back(c);
    slowest.push_back({c, faulted, switched, i});
    std::sort(slowest.begin(), slowest.end(),
              [](const Sample& x, const Sample& y) { return x.ticks > y.ticks; });
    if (slowest.size() > 5) slowest.pop_back();
  }
  nlohmann::json slow = nlohmann::json::array();
  for (const Sample& x : slowest) {
    slow.push_back({{"ns", static_cast<double>(x.ticks) / tpn},
                    {"page_faults", x.faults},
                    {"switches", x.switches},
                    {"thread", x.thread}});
  }
  auto ns = [&](const std::vector<uint64_t>& v, double p) {
    return static_cast<double>(percentile(v, p)) / tpn;
  };
  return {{"threads", threads},
          {"median_ticks", percentile(cost, 50)},
          {"median_ns", ns(cost, 50)},
          {"p99_ns", ns(cost, 99)},
          {"max_ns", ns(cost, 100)},
          {"preempted", cost.size() - not_preempted.size()},
          {"not_preempted_median_ns", ns(not_preempted, 50)},
          {"not_preempted_p99_ns", ns(not_preempted, 99)},
          {"not_preempted_max_ns", ns(not_preempted, 100)},
          {"baseline_5us_spin_same_threads",
           {{"median_ns", ns(baseline, 50)},
            {"p99_ns", ns(baseline, 99)},
            {"max_ns", ns(baseline, 100)}}},
          {"slowest", slow},
          {"page_faults_median", percentile(faults, 50)},
          // A page fault in a VM whose host backs guest memory lazily (or takes back what the
          // guest freed: a balloon's free page reporting) can cost a trip through the host.
          {"with_page_faults",
           {{"count", faulted_cost.size()},
            {"median_ns", ns(faulted_cost, 50)},
            {"max_ns", ns(faulted_cost, 100)}}},
          {"without_page_faults",
           {{"count", unfaulted_cost.size()},
            {"median_ns", ns(unfaulted_cost, 50)},
            {"p99_ns", ns(unfaulted_cost, 99)},
            {"max_ns", ns(unfaulted_cost, 100)}}},
          {"page_faults_max", percentile(faults, 100)},
          {"target_median_ns", 10000},
          {"target_max_ns", 50000}};
}

// rdtsc around each of `samples` events on a thread pinned to one CPU, in batches; a batch
// during which the thread was switched out (getrusage(RUSAGE_THREAD) counts) is discarded.
// The same timer around nothing, interleaved, gives the tail the machine gives any code.
// `warmup` events before the first sample fill the tracer's buffers once (their first touch
// is then out of the figures: compare tracers with it, see a first lap's cost without).
template <class Probe>
nlohmann::json per_event(Probe& probe, uint64_t samples, double tpn, uint64_t warmup = 0) {
  nlohmann::json out;
  std::thread([&] {
    pin_to_last_cpu();
    probe.event(0, 0);  // the thread's first event (a ring claimed, say) is not a sample
    probe.attach();
    for (uint64_t i = 0; i < warmup; ++i) probe.event(i, 0);
    const uint64_t block = probe.block, ring = probe.ring;
    const uint32_t kBatch = 1000;
    std::vector<uint64_t> normal, block_start, block_start_first_lap, first_lap, floor;
    // Each normal sample over its batch's median: a batch lasts tens of microseconds, within
    // one of the machine's speed states (they flip about every second, 1.7x apart), so this
    // tail is the tracer's own, not that of the machine's speed.
    std::vector<double> relative, floor_relative;
    std::vector<uint64_t> batch_normal;
    // Every sample vector's memory is faulted in before the first batch: a page fault taken
    // between batches (a trip through the hypervisor here) would leave the next events a cold
    // TLB and cache, a tail of the benchmark's own making.
    auto prefault = [](auto& v, size_t n) {
      v.resize(n);
      v.clear();
    };
    prefault(normal, samples);
    prefault(relative, samples);
    prefault(floor_relative, samples);
    prefault(floor, samples / kBatch * 64 + 64);
    prefault(block_start, samples / 64);
    prefault(first_lap, samples / 64);
    prefault(batch_normal, kBatch);
    // A sample over 1 us was interrupted (an interrupt or the hypervisor taking the CPU
    // without a context switch in the guest): the fast path has nothing that takes that long.
    // Such samples are counted for the events and for the empty timer alike, and the tail is
    // also given without them.
    const auto interrupted = static_cast<uint64_t>(tpn * 1000);
    uint64_t interrupted_events = 0, interrupted_empty = 0;
    std::vector<double> relative_uninterrupted;
    prefault(relative_uninterrupted, samples);
    uint64_t discarded = 0, kept = 0;
    std::vector<uint64_t> cost(kBatch), head_before(kBatch), head_after(kBatch), empty(kBatch);
    while (kept < samples) {
      long s0 = thread_switches();
      for (uint32_t i = 0; i < kBatch; ++i) {
        uint64_t e0 = ticks();
        uint64_t e1 = ticks();
        empty[i] = e1 - e0;
        head_before[i] = probe.head();
        uint64_t t0 = ticks();
        probe.event(i, kept);
        uint64_t t1 = ticks();
        cost[i] = t1 - t0;
        head_after[i] = probe.head();
      }
      for (uint32_t i = 0; i < 64; ++i) {
        uint64_t t0 = ticks();
        uint64_t t1 = ticks();
        floor.push_back(t1 - t0);
      }
      if (thread_switches() != s0) {
        discarded += kBatch;
        continue;
      }
      batch_normal.clear();
      for (uint32_t i = 0; i < kBatch; ++i) {
        // The record landed in a new block when its end is in a later block than the head
        // before it (or the head jumped past padding to the next block).
        bool starts_block =
            block && (head_after[i] - 1) / block !=
                         (head_before[i] ? (head_before[i] - 1) / block : ~uint64_t{0});
        bool in_first_lap = ring && head_after[i] <= ring;
        if (starts_block) {
          (in_first_lap ? block_start_first_lap : block_start).push_back(cost[i]);
        } else if (in_first_lap) {
          first_lap.push_back(cost[i]);
        } else {
          normal.push_back(cost[i]);
          batch_normal.push_back(cost[i]);
        }
      }
      if (uint64_t median = percentile(batch_normal, 50); median != 0) {
        for (uint64_t c : batch_normal) {
          relative.push_back(static_cast<double>(c) / median);
          if (c > interrupted) {
            ++interrupted_events;
          } else {
            relative_uninterrupted.push_back(static_cast<double>(c) / median);
          }
        }
      }
      if (uint64_t median = percentile(empty, 50); median != 0) {
        for (uint64_t c : empty) {
          floor_relative.push_back(static_cast<double>(c) / median);
          if (c > interrupted) ++interrupted_empty;
        }
      }
      kept += kBatch;
    }
    auto ns = [&](const std::vector<uint64_t>& v, double p) {
      return static_cast<double>(percentile(v, p)) / tpn;
    };
    out = {{"samples", kept},
           {"warmup_events", warmup},
           {"discarded_preempted", discarded},
           {"method",
            "rdtsc (lfence) around each call, thread pinned to one CPU, batches of 1000 with a "
            "context switch (getrusage RUSAGE_THREAD) discarded" +
                std::string(block ? "; block starts and first-lap samples apart"
                                  : "; every sample kept together (sub-buffer switches too)")},
           {"rdtsc_pair_floor_ns", ns(floor, 50)},
           {"normal",
            {{"count", normal.size()},
             {"p50_ns", ns(normal, 50)},
             {"p99_ns", ns(normal, 99)},
             {"p99_9_ns", ns(normal, 99.9)},
             {"p99_99_ns", ns(normal, 99.99)},
             {"p99_999_ns", ns(normal, 99.999)},
             {"max_ns", ns(normal, 100)}}},
           {"normal_over_batch_median",
            {{"p99", percentile(relative, 99)},
             {"p99_9", percentile(relative, 99.9)},
             {"p99_99", percentile(relative, 99.99)},
             {"p99_999", percentile(relative, 99.999)},
             {"target_p99_99", 2.0}}},
           {"interrupted_over_1us",
            {{"events_per_million",
              1e6 * static_cast<double>(interrupted_events) / std::max<size_t>(1, relative.size())},
             {"empty_timer_per_million", 1e6 * static_cast<double>(interrupted_empty) /
                                             std::max<size_t>(1, floor_relative.size())},
             {"note",
              "a sample's chance of being interrupted grows with its length: the event's "
              "window is about twice the empty timer's"}}},
           {"uninterrupted_over_batch_median",
            {{"p99_9", percentile(relative_uninterrupted, 99.9)},
             {"p99_99", percentile(relative_uninterrupted, 99.99)},
             {"p99_999", percentile(relative_uninterrupted, 99.999)},
             {"target_p99_99", 2.0}}},
           {"empty_timer_over_batch_median",
            {{"p99", percentile(floor_relative, 99)},
             {"p99_9", percentile(floor_relative, 99.9)},
             {"p99_99", percentile(floor_relative, 99.99)},
             {"p99_999", percentile(floor_relative, 99.999)}}}};
    if (block == 0) return;
    out["first_lap"] = {{"count", first_lap.size()},
                        {"p50_ns", ns(first_lap, 50)},
                        {"p99_ns", ns(first_lap, 99)},
                        {"max_ns", ns(first_lap, 100)}};
    out["block_start"] = {{"count", block_start.size()},
                          {"p50_ns", ns(block_start, 50)},
                          {"p99_ns", ns(block_start, 99)},
                          {"max_ns", ns(block_start, 100)},
                          {"slow_path_ns", ns(block_start, 50) - ns(normal, 50)},
                          {"target_slow_path_ns", 200}};
    out["block_start_first_lap"] = {{"count", block_start_first_lap.size()},
                                    {"p50_ns", ns(block_start_first_lap, 50)},
                                    {"max_ns", ns(block_start_first_lap, 100)}};
    out["block_bytes"] = block;
    out["ring_bytes"] = ring;
  }).join();
  return out;
}

}  // namespace bench
