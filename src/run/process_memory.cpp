#include "run/process_memory.hpp"

#include <fstream>
#include <limits>
#include <malloc.h>
#include <string>

namespace normlab {

bool reset_peak_rss() {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    std::ofstream f("/proc/self/clear_refs");
    if (!f) return false;
    f << "5";
    f.flush();
    return static_cast<bool>(f);
}

double peak_rss_mib() {
    std::ifstream in("/proc/self/status");
    std::string key;
    double kib = 0;
    while (in >> key) {
        if (key == "VmHWM:" && in >> kib) return kib / 1024.0;
        in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace normlab
