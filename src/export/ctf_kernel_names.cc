// The names kernel (ftrace) events and fields take in a CTF export: LTTng's kernel tracer's
// where it names the same tracepoint differently (lttng-modules, include/instrumentation/
// events/*.h), ftrace's otherwise, so that tools written for LTTng kernel traces (babeltrace2
// filters, Trace Compass's kernel analyses) find sched_switch's next_tid or a system call's
// entry where they look for it.
#include <cstring>
#include <string_view>

#include "export/ctf.hpp"

namespace nanotrace::exporter::ctf {
namespace {

struct Renamed {
  const char* system;
  const char* ftrace;
  const char* lttng;
};

// Tracepoints LTTng declares under another name (its TRACEPOINT_EVENT_MAP entries) in the
// systems a storage or scheduling trace is likely to enable.
constexpr Renamed kRenamedEvents[] = {
    {"irq", "softirq_entry", "irq_softirq_entry"},
    {"irq", "softirq_exit", "irq_softirq_exit"},
    {"irq", "softirq_raise", "irq_softirq_raise"},
    {"timer", "hrtimer_init", "timer_hrtimer_init"},
    {"timer", "hrtimer_start", "timer_hrtimer_start"},
    {"timer", "hrtimer_cancel", "timer_hrtimer_cancel"},
    {"timer", "hrtimer_expire_entry", "timer_hrtimer_expire_entry"},
    {"timer", "hrtimer_expire_exit", "timer_hrtimer_expire_exit"},
    {"timer", "itimer_state", "timer_itimer_state"},
    {"timer", "itimer_expire", "timer_itimer_expire"},
    {"kmem", "kmalloc", "kmem_kmalloc"},
    {"kmem", "kmalloc_node", "kmem_kmalloc_node"},
    {"kmem", "kfree", "kmem_kfree"},
    {"kmem", "mm_page_alloc", "kmem_mm_page_alloc"},
    {"kmem", "mm_page_alloc_zone_locked", "kmem_mm_page_alloc_zone_locked"},
    {"kmem", "mm_page_alloc_extfrag", "kmem_mm_page_alloc_extfrag"},
    {"kmem", "mm_page_free", "kmem_mm_page_free"},
    {"kmem", "mm_page_free_batched", "kmem_mm_page_free_batched"},
    {"kmem", "mm_page_pcpu_drain", "kmem_mm_page_pcpu_drain"},
    {"power", "cpu_idle", "power_cpu_idle"},
    {"power", "cpu_frequency", "power_cpu_frequency"},
    {"power", "machine_suspend", "power_machine_suspend"},
    {"power", "wakeup_source_activate", "power_wakeup_source_activate"},
    {"power", "wakeup_source_deactivate", "power_wakeup_source_deactivate"},
    {"power", "clock_enable", "power_clock_enable"},
    {"power", "clock_disable", "power_clock_disable"},
    {"power", "clock_set_rate", "power_clock_set_rate"},
    {"preemptirq", "irq_disable", "preemptirq_irq_disable"},
    {"preemptirq", "irq_enable", "preemptirq_irq_enable"},
    {"preemptirq", "preempt_disable", "preemptirq_preempt_disable"},
    {"preemptirq", "preempt_enable", "preemptirq_preempt_enable"},
    {"printk", "console", "printk_console"},
    {"skb", "kfree_skb", "skb_kfree"},
    {"skb", "consume_skb", "skb_consume"},
    {"net", "netif_receive_skb", "net_if_receive_skb"},
    {"net", "netif_rx", "net_if_rx"},
    {"net", "netif_receive_skb_entry", "net_if_receive_skb_entry"},
    {"net", "netif_receive_skb_exit", "net_if_receive_skb_exit"},
    {"net", "netif_rx_entry", "net_if_rx_entry"},
    {"net", "netif_rx_exit", "net_if_rx_exit"},
    {"net", "napi_gro_receive_entry", "net_napi_gro_receive_entry"},
    {"net", "napi_gro_receive_exit", "net_napi_gro_receive_exit"},
    {"vmscan", "mm_shrink_slab_start", "mm_vmscan_shrink_slab_start"},
    {"vmscan", "mm_shrink_slab_end", "mm_vmscan_shrink_slab_end"},
    {"writeback", "balance_dirty_pages", "writeback_balance_dirty_pages"},
    {"writeback", "bdi_dirty_ratelimit", "writeback_bdi_dirty_ratelimit"},
    {"writeback", "global_dirty_state", "writeback_global_dirty_state"},
};

// The sched tracepoints LTTng declares with the thread's id named `tid` where ftrace says
// `pid` (prev_pid -> prev_tid, parent_pid -> parent_tid...): the kernel's pid is a thread id.
constexpr const char* kSchedTidEvents[] = {
    "sched_kthread_stop", "sched_waking",       "sched_wakeup",       "sched_wakeup_new",
    "sched_switch",       "sched_migrate_task", "sched_process_free", "sched_process_exit",
    "sched_wait_task",    "sched_process_wait", "sched_process_fork", "sched_process_exec",
    "sched_stat_wait",    "sched_stat_sleep",   "sched_stat_iowait",  "sched_stat_blocked",
    "sched_stat_runtime", "sched_pi_setprio",
};

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string kernel_event_name(const EventInfo& e) {
  // ftrace's per-call syscall events are LTTng's syscall_entry_NAME / syscall_exit_NAME.
  if (e.group == "syscalls") {
    if (starts_with(e.name, "sys_enter_")) return "syscall_entry_" + e.name.substr(10);
    if (starts_with(e.name, "sys_exit_")) return "syscall_exit_" + e.name.substr(9);
  }
  for (const Renamed& r : kRenamedEvents) {
    if (e.group == r.system && e.name == r.ftrace) return r.lttng;
  }
  return e.name;
}

std::string kernel_field_name(const EventInfo& e, const std::string& field) {
  if (e.group != "sched") return field;
  bool renamed = false;
  for (const char* name : kSchedTidEvents) renamed |= e.name == name;
  if (!renamed) return field;
  if (field == "pid") return "tid";
  if (field.size() > 4 && field.compare(field.size() - 4, 4, "_pid") == 0) {
    return field.substr(0, field.size() - 4) + "_tid";
  }
  return field;
}

}  // namespace nanotrace::exporter::ctf
