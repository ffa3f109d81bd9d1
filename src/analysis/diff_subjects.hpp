// What the parts of `nanotrace diff` hand each other: the samples of one subject on both
// sides (diff.cc fills them from traces, diff_bench.cc from benchmark results), and the
// comparison and ranking they share.
#pragma once

#include <string>
#include <vector>

#include "analysis/diff_stats.hpp"
#include "nanotrace/diff.hpp"

namespace nanotrace::diff {

struct SubjectSamples {
  std::string kind;  // "pair", "stage", "thread", "benchmark"
  std::string name;
  std::string unit = "ns";
  diffstats::SampleSet a, b;
};

// Benchmark results of both sides as subjects (every benchmark found on both sides).
// Errors: kIoError (unreadable), kCorrupt (not a Google Benchmark or iograph bench result).
Status load_benchmarks(const std::vector<std::string>& a, const std::vector<std::string>& b,
                       std::vector<SubjectSamples>* subjects, std::vector<std::string>* notes);

// On-CPU and off-CPU time of each traced thread (by name), when every run of both sides holds
// the scheduler's sched_switch events (diff_threads.cc).
void thread_samples(const std::vector<Trace*>& a, const std::vector<Trace*>& b,
                    std::vector<SubjectSamples>* subjects, std::vector<std::string>* notes);

// Compares every subject, applies Holm's correction over all of them and ranks the findings.
void compare_subjects(std::vector<SubjectSamples>& subjects, DiffReport* report);

}  // namespace nanotrace::diff
