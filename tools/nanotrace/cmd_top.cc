// `nanotrace top`: a live view of the traced processes of this node, refreshed every interval:
// rates per event, latency per pair rule, the operations in flight oldest first, losses per
// process. A full-screen view (ncurses) on a terminal; `--once` prints one frame as text or,
// with `--json`, as JSON for scripts. The view reads the rings without consuming them.
#include <curses.h>
#include <fmt/format.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <clocale>
#include <cmath>
#include <thread>

#include "commands.hpp"
#include "live/live_view.hpp"
#include "top_command.hpp"
#include "top_text.hpp"

namespace nanotrace::cli {
namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

double monotonic_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void sleep_s(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Ctrl-C and SIGTERM end the view like q (the terminal is restored), interrupting getch.
void catch_stop_signals() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

void draw(const live::LiveFrame& frame, const TopLayout& layout) {
  erase();
  int row = 0;
  for (const TopLine& line : render_top(frame, layout)) {
    if (line.heading) attron(A_REVERSE);
    mvaddnstr(row++, 0, line.text.c_str(), static_cast<int>(line.text.size()));
    if (line.heading) attroff(A_REVERSE);
  }
  refresh();
}

// Keys: q (or Esc) quits, p or space pauses the display (sampling goes on, so nothing is
// missed meanwhile), s sorts by rate or by name, w shows the operations in flight alone.
// Returns false to quit.
bool handle_key(int key, TopLayout* layout) {
  switch (key) {
    case 'q':
    case 'Q':
    case 27:
      return false;
    case 'p':
    case 'P':
    case ' ':
      layout->paused = !layout->paused;
      break;
    case 's':
    case 'S':
      layout->sort = layout->sort == TopSort::kRate ? TopSort::kName : TopSort::kRate;
      break;
    case 'w':
    case 'W':
      layout->waiters_only = !layout->waiters_only;
      break;
    default:
      break;
  }
  return true;
}

int run_screen(live::LiveView& view, const TopArgs& args) {
  std::setlocale(LC_ALL, "");
  catch_stop_signals();
  if (initscr() == nullptr) return fail(Status::Invalid("cannot start the terminal view"));
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  TopLayout layout;
  layout.every_s = args.interval_s;
  live::LiveFrame shown = view.sample();
  double next = monotonic_s() + args.interval_s;
  bool dirty = true;
  while (!g_stop) {
    layout.width = COLS;
    layout.rows = LINES;
    if (dirty) draw(shown, layout);
    dirty = false;
    const double wait = next - monotonic_s();
    timeout(wait > 0 ? static_cast<int>(std::ceil(wait * 1000)) : 0);
    const int key = getch();
    if (key != ERR) {
      if (!handle_key(key, &layout)) break;
      dirty = true;  // also KEY_RESIZE: drawn again at the new size
    }
    if (monotonic_s() >= next) {
      live::LiveFrame frame = view.sample();
      if (!layout.paused) shown = std::move(frame);
      // A late sample does not make the next ones come faster.
      next = std::max(next + args.interval_s, monotonic_s() + args.interval_s / 4);
      dirty = true;
    }
  }
  endwin();
  return 0;
}

}  // namespace

int cmd_top(const TopArgs& args) {
  if (!(args.interval_s >= 0.05 && args.interval_s <= 3600)) {
    return fail(Status::Invalid("--interval must be between 0.05 and 3600 seconds"));
  }
  if (args.json && !args.once) {
    return fail(Status::Invalid("--json prints one frame: use it with --once"));
  }
  if (!args.once && !(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))) {
    return fail(Status::Invalid("top's view needs a terminal; for scripts: --once [--json]"));
  }
  live::LiveOptions options;
  options.sources = args.sources;
  options.waiters = args.waiters;
  options.max_open = args.max_open;
  for (const std::string& text : args.pairs) {
    auto rule = parse_pair_rule(text);
    if (!rule.ok()) return fail(rule.status());
    options.rules.push_back(*rule);
  }
  auto view = live::LiveView::create(options);
  if (!view.ok()) return fail(view.status());
  if (!args.once) return run_screen(**view, args);
  // One frame: the rings' past first (the operations already in flight), then one interval.
  (*view)->sample();
  sleep_s(args.interval_s);
  live::LiveFrame frame = (*view)->sample();
  if (args.json) {
    fmt::print("{}\n", live::frame_json(frame));
    return 0;
  }
  TopLayout layout;
  layout.every_s = args.interval_s;
  for (const TopLine& line : render_top(frame, layout)) fmt::print("{}\n", line.text);
  return 0;
}

void register_top_command(CLI::App& app, TopCommand* c) {
  TopArgs& a = c->args;
  c->top = app.add_subcommand(
      "top", "Live view of traced processes: rates, pair latency, operations in flight, losses");
  c->top->add_option("SOURCE", a.sources,
                     "pid, name:NAME or segment path of live processes (default: every live "
                     "traced process of this node, found anew each interval)");
  c->top->add_option("--pair", a.pairs,
                     "BEGIN,END,KEY pair rule, as latency takes it (default: found from event "
                     "names, X_begin/X_end, submit/complete...)");
  c->top->add_option("--interval", a.interval_s, "Seconds between frames")->default_val(1.0);
  c->top->add_flag("--once", a.once, "Print one frame (after one interval) and exit");
  c->top->add_flag("--json", a.json, "With --once: the frame as JSON");
  c->top->add_option("--waiters", a.waiters, "Operations in flight listed, oldest first")
      ->default_val(20);
  c->top
      ->add_option("--max-open", a.max_open,
                   "Operations in flight kept per process and rule (the oldest past it are "
                   "dropped and counted)")
      ->default_val(100000)
      ->check(CLI::Range(1u, 100000000u));
}

bool run_top_command(const TopCommand& c, int* status) {
  if (!c.top->parsed()) return false;
  *status = cmd_top(c.args);
  return true;
}

}  // namespace nanotrace::cli
