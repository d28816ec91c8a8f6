#pragma once
// Resource limits and interruption: how much memory a run may use, and what
// Ctrl-C does (remove the staging folder, end by the signal; never a half-written report).
#include <cstddef>
#include <string>

namespace normlab {

/// The default of --max-memory: half of physical_memory_bytes() (data/system_memory.hpp).
std::size_t default_memory_limit();

/// Parses a --max-memory value: bytes ("1000000"), with a binary unit ("512M", "8G",
/// "1.5GiB", "2T"; K/M/G/T with an optional "iB" or "B", case-insensitive), a share of the
/// physical memory ("75%"), or "none" for no limit (SIZE_MAX). Empty: the default. "0"
/// is refused (a limit nothing fits; it does not mean "none").
/// Throws InputError "--max-memory: ..." for anything else.
std::size_t parse_memory_size(const std::string& text);

/// Describes the limit for messages: "11.7 GiB (--max-memory 12G)" or
/// "11.7 GiB (--max-memory; default: half of the 23.4 GiB of memory)".
std::string describe_memory_limit(const std::string& option_text);

/// Throws InputError "<what> needs about <need>, more than half of this machine's memory
/// (<total>)" when need_bytes is above default_memory_limit() ("needs more than 16 EiB" from
/// 2^64 bytes on): the check of the commands without --max-memory (bench), made before they
/// allocate.
void check_default_memory(const std::string& what, double need_bytes);

/// Makes SIGINT, SIGTERM and SIGHUP remove the staging folders of unfinished output
/// folders (abandon_output_folders), print "normlab: interrupted ..." and end the process
/// by that signal (its default action), which a shell reports as 128 + the signal number
/// (130 for SIGINT). A signal ignored at start (nohup; `&` in a script) stays ignored.
/// The signals are handled by a dedicated thread
/// (sigwait), so cleanup may use the file system safely while the main thread is busy in
/// a long computation. Call once, early in main, before normlab starts any thread; threads
/// a library started before main (OpenBLAS's worker pool) hand the signals on to it.
void install_interrupt_handler();

/// Tells the interrupt handler whether an output folder of this command is unfinished (run
/// and merge, from their start until just before they commit): an interrupt then says that
/// an earlier result in the output folder, if any, is left as it was, also when it comes
/// before the first file was staged ("normlab: interrupted (SIGINT); nothing was written,
/// and an earlier result ..."). Otherwise, during the commit included, an interrupt with
/// nothing staged prints "normlab: interrupted (SIGINT)".
void note_interrupt_keeps_output(bool unfinished);

}  // namespace normlab
