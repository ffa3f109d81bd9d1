// <tracefs.h> for C++: the header has no extern "C" block, and its inline histogram helpers
// pass a plain 0 where C++ wants the enum. An overload taking int (declared before, defined
// after the header) gives those calls a target; it converts and forwards.
#pragma once

struct tracefs_instance;
struct tracefs_hist;
int tracefs_hist_command(tracefs_instance* instance, tracefs_hist* hist, int command);

extern "C" {
#include <tracefs.h>
}

inline int tracefs_hist_command(tracefs_instance* instance, tracefs_hist* hist, int command) {
  return tracefs_hist_command(instance, hist, static_cast<enum tracefs_hist_command>(command));
}
