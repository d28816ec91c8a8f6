#pragma once
// Values of a config document that do not come from the config file: --set overrides,
// --seed, and the values of sweep points. An error at such a value blames whoever set it
// ("--set norms.ln.epsx=1e-3: unknown key ..."), not the file, which does not hold it; so
// does an error at a file's value that depends on one (JsonError::related), and a warning.
#include <string>
#include <vector>

#include "json/reader.hpp"

namespace normlab {

/// Sets the value at PATH in a config document. PATH is a dotted path ("norms.ln.eps",
/// "data.x.shape.0") or a JSON pointer ("/norms/ln/eps"); every step but the last must
/// exist (a misspelled step is an error with a did-you-mean, not a silent new entry).
/// `who` names the setter in messages ("--set norms.ln.eps=1e-3"). Returns the JSON
/// pointer that was set. Throws InputError "<who>: /norms/lnx does not exist ...".
std::string set_config_value(Json& config, const std::string& path, Json value, const std::string& who);

/// The JSON pointer that PATH (a dotted path or a JSON pointer, as set_config_value takes)
/// names: "norms.ln.eps" and "/norms/ln/eps" both give "/norms/ln/eps", so two spellings of
/// one value compare equal. The config is not consulted.
std::string config_pointer(const std::string& path);

/// Removes the key at PATH (dotted path or JSON pointer, as set_config_value) from its
/// object, so that the key's default applies: `--unset data.tok.lengths`. Returns the JSON
/// pointer removed. Throws InputError "<who>: ..." when a step or the key does not exist
/// (with a did-you-mean) or PATH names an element of a list.
std::string remove_config_value(Json& config, const std::string& path, const std::string& who);

/// Applies one "--set PATH=VALUE" assignment: VALUE is parsed as JSON, else taken as a
/// string (unless it starts with [ or {: malformed JSON is then an error). Returns the JSON
/// pointer that was set. Throws InputError naming the assignment.
std::string apply_override(Json& config, const std::string& assignment);

/// Who set which values of a config document, in the order they were set.
class Provenance {
public:
    /// One value set from outside the file.
    struct Origin {
        std::string pointer;  ///< the value it set, e.g. "/norms/ln/eps"
        std::string label;    ///< who: "--set norms.ln.eps=-1", "cfg.json: /sweep/norms.ln.eps/2"
    };
    /// Records that `label` set the value at `pointer`; what was recorded at or under that
    /// pointer is forgotten (it was overwritten).
    void record(const std::string& pointer, const std::string& label);
    /// The origin of the value at `pointer`: the record at it or at its closest ancestor;
    /// nullptr when the value comes from the config file.
    const Origin* origin_of(const std::string& pointer) const;
    /// Who set what a message at `pointer` is about: the origin of that value; else, for
    /// each of `related` (other values the message depends on: the data a norm met, the
    /// other key of a conflict), the origin of it or of anything set under it, their labels
    /// joined by " and ". "" when all of it comes from the config file.
    std::string setter(const std::string& pointer, const std::vector<std::string>& related = {}) const;
    /// The message of `e` blaming who set its value or a related one (setter()): "<label>:
    /// unknown key "k" in <object> (did you mean "h"?)" for an unknown key (or, for another
    /// framework's name, "(<JsonError::note>)"), "<label>:
    /// <pointer>: <reason>" otherwise; "" when it all comes from the file.
    std::string blame(const JsonError& e) const;
    /// A warning's line about the value at `at`: "<label>: <pointer>: <reason>" when an
    /// override or sweep point set it or one of `related` (setter()), else at.message(reason).
    std::string message(const JsonLocation& at, const std::string& reason,
                        const std::vector<std::string>& related = {}) const;

private:
    std::vector<Origin> m_origins;
};

/// Calls f(); a JsonError at a value that `p` traces to an override is rethrown as an
/// InputError that names the override (Provenance::blame); other errors pass unchanged.
/// `p` is read when the error arrives, so it may change while f runs (sweep points).
template <class F>
auto blame_origins(const Provenance& p, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const JsonError& e) {
        const std::string msg = p.blame(e);
        if (msg.empty()) throw;
        throw InputError(msg);
    }
}

}  // namespace normlab
