#include "run/safety.hpp"

#include <cctype>
#include <cmath>
#include <csignal>
#include <atomic>
#include <cstring>
#include <algorithm>
#include <limits>
#include <mutex>
#include <pthread.h>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "data/estimate.hpp"
#include "data/system_memory.hpp"
#include "json/text.hpp"
#include "report/output.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

constexpr std::size_t kNoLimit = std::numeric_limits<std::size_t>::max();

}  // namespace

std::size_t default_memory_limit() {
    const std::size_t total = physical_memory_bytes();
    return total == 0 ? kNoLimit : total / 2;
}

std::size_t parse_memory_size(const std::string& text) {
    if (text.empty()) return default_memory_limit();
    const std::string s = lower_case(text);
    if (s == "none") return kNoLimit;  // "0" is refused below: it is not a spelling of "no limit"
    auto bad = [&]() -> std::size_t {
        throw InputError("--max-memory: expected a size such as 8G, 512M, 1.5GiB or 75% (of the memory), or "
                         "none, but got " + quoted_text(text));
    };
    std::size_t used = 0;
    double v = 0;
    try {
        v = std::stod(s, &used);
    } catch (const std::exception&) {
        return bad();
    }
    if (v == 0 && s[0] != '-' && s[0] != '+')  // documented as refused: say what to give instead
        throw InputError("--max-memory: " + quoted_text(text) + " would allow no memory at all; for no limit, give none");
    if (!(v > 0) || !std::isfinite(v) || s[0] == '-' || s[0] == '+') return bad();
    std::string unit = s.substr(used);
    if (unit == "%") {
        if (v > 100) return bad();
        return static_cast<std::size_t>(static_cast<double>(physical_memory_bytes()) * v / 100);
    }
    if (unit.size() > 1 && (unit.substr(1) == "ib" || unit.substr(1) == "b")) unit = unit.substr(0, 1);
    double mult = 1;
    if (unit.empty() || unit == "b") mult = 1;
    else if (unit == "k") mult = 1024.0;
    else if (unit == "m") mult = 1024.0 * 1024;
    else if (unit == "g") mult = 1024.0 * 1024 * 1024;
    else if (unit == "t") mult = 1024.0 * 1024 * 1024 * 1024;
    else return bad();
    const double bytes = v * mult;
    if (bytes >= 1.8e19) return kNoLimit;
    if (bytes < 1) return bad();
    return static_cast<std::size_t>(bytes);
}

std::string describe_memory_limit(const std::string& option_text) {
    const std::size_t limit = parse_memory_size(option_text);
    if (!option_text.empty()) return format_bytes(limit) + " (--max-memory " + option_text + ")";
    return format_bytes(limit) + " (--max-memory; default: half of the " + format_bytes(physical_memory_bytes()) +
           " of memory)";
}

void check_default_memory(const std::string& what, double need_bytes) {
    if (need_bytes <= static_cast<double>(default_memory_limit())) return;
    // 2^64: the size_t maximum rounds up to it, and a double that large does not convert.
    const double cap = static_cast<double>(std::numeric_limits<std::size_t>::max());
    const std::string need = need_bytes >= cap ? format_bytes(std::numeric_limits<std::size_t>::max())
                                               : "about " + format_bytes(static_cast<std::size_t>(need_bytes));
    throw InputError(what + " needs " + need + ", more than half of this machine's memory (" +
                     format_bytes(physical_memory_bytes()) + ")");
}

namespace {

// The thread that waits for the interrupt signals (install_interrupt_handler).
pthread_t g_signal_waiter;
// Set by note_interrupt_keeps_output; read by the waiting thread.
std::atomic<bool> g_keeps_output{false};

// Threads a shared library starts while it is loaded, before main (OpenBLAS starts its
// worker pool then), do not inherit main's signal mask, so a signal sent to the process
// may be delivered to one of them. This handler runs only in such a thread and hands the
// signal on to the waiting thread, which blocks it and so receives it in sigwait
// (pthread_kill is async-signal-safe).
extern "C" void forward_to_signal_waiter(int sig) { pthread_kill(g_signal_waiter, sig); }

}  // namespace

void install_interrupt_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        // A signal ignored when normlab starts stays ignored, as POSIX asks of programs that
        // catch signals: nohup ignores SIGHUP, and a shell ignores SIGINT in a command it
        // runs in the background with & from a script.
        sigset_t set;
        sigemptyset(&set);
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
            struct sigaction old {};
            if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
            sigaddset(&set, sig);
        }
        if (sigisemptyset(&set)) return;
        // Blocked here, in the main thread, before normlab starts any thread: every thread
        // it starts inherits the mask, so only the sigwait below receives these signals
        // (threads started before main: forward_to_signal_waiter).
        if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;
        std::thread waiter([set] {
            int sig = 0;
            if (sigwait(&set, &sig) != 0) ::_exit(1);
            const std::size_t removed = abandon_output_folders();
            const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
            const char* what = removed ? "; the unfinished results were removed and an earlier result in "
                                         "the output folder is left as it was"
                               : g_keeps_output ? "; nothing was written, and an earlier result in the output "
                                                  "folder, if any, is left as it was"
                                                : "";
            const std::string msg = std::string("normlab: interrupted (") + name + ")" + what + "\n";
            [[maybe_unused]] auto n = ::write(2, msg.data(), msg.size());
            // End by the signal itself, not by exit(128 + sig): a shell that runs normlab in a
            // loop sees that its child died of SIGINT and stops the loop too (bash stops only
            // then), and its $? is 128 + sig either way.
            std::signal(sig, SIG_DFL);
            sigset_t one;
            sigemptyset(&one);
            sigaddset(&one, sig);
            pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
            ::raise(sig);
            ::_exit(128 + sig);
        });
        g_signal_waiter = waiter.native_handle();
        waiter.detach();
        struct sigaction sa {};
        sa.sa_handler = forward_to_signal_waiter;
        sigemptyset(&sa.sa_mask);
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            if (sigismember(&set, sig)) sigaction(sig, &sa, nullptr);
    });
}

void note_interrupt_keeps_output(bool unfinished) { g_keeps_output = unfinished; }

}  // namespace normlab
