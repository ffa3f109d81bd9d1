// The shared runtime (libnanotrace.so) is linked -z nodelete: its code stays mapped until
// the process ends, whatever is dlclosed.
#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
extern const bool kRuntimeNeverUnloaded = true;
}
