// The LTTng-UST tracepoint provider of the twins built with NANOTRACE_TWIN_LTTNG
// (startup_twin.cc, tail_twin.cc): twin:hello with one 64-bit integer and twin:ev with two,
// the same fields as the nanotrace twins record. The provider is built into each twin
// (LTTNG_UST_TRACEPOINT_CREATE_PROBES there).
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER twin

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "lttng_twin_tp.h"

#if !defined(NANOTRACE_BENCH_LTTNG_TWIN_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define NANOTRACE_BENCH_LTTNG_TWIN_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(twin, hello, LTTNG_UST_TP_ARGS(uint64_t, n),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, n, n)))

LTTNG_UST_TRACEPOINT_EVENT(twin, ev, LTTNG_UST_TP_ARGS(uint64_t, a, uint64_t, b),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(uint64_t, a, a)
                                                   lttng_ust_field_integer(uint64_t, b, b)))

#endif

#include <lttng/tracepoint-event.h>
