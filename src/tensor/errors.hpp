#pragma once
// The two kinds of failure normlab distinguishes; the CLI maps them to exit codes.
#include <stdexcept>
#include <string>

namespace normlab {

/// Anything wrong with what the user gave us: command line, config, data files, shapes,
/// parameters. Exit code 2. The message is one line: where (file, JSON pointer), what, why.
struct InputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// A failure of the environment (cannot write the output, out of memory). Exit code 1.
struct EnvError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace normlab
