// The static runtime may be part of a plugin that is dlclosed: its code can be unmapped.
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
extern const bool kRuntimeNeverUnloaded = false;
}
