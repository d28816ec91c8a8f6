#pragma once
// A whole experiment config (DESIGN.md "The config file"): parsed, typed and validated as
// far as is possible without the data; shape checks happen when norms meet data.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.hpp"
#include "json/reader.hpp"
#include "json/text.hpp"
#include "norm/presets.hpp"
#include "stack/stack.hpp"

namespace normlab {

/// One entry of "analyses" as the config gives it.
struct AnalysisSpec {
    std::string type;
    JsonLocation loc;                 ///< /analyses/<i>
    Json params;                      ///< the whole object (type, data, norms and its own keys)
    std::vector<std::string> data;    ///< names under /data, validated to exist
    std::vector<std::string> norms;   ///< names under /norms, validated to exist
    std::filesystem::path base_dir;   ///< the config's folder: file paths in its keys resolve here
    std::vector<std::string> stacks;  ///< names under /stacks (analyses that take stacks), validated to exist
};

/// The analysis types a config may name. The analyses live above the config module, so the
/// caller hands them in: their names (for "unknown analysis" with a did-you-mean) and the
/// check of one entry's own keys (throws InputError at spec.loc).
struct AnalysisCatalog {
    std::vector<std::string> names;
    /// The keys of an analysis type besides type, data and norms (all it may hold).
    std::function<std::vector<std::string>(const std::string& type)> keys;
    std::function<void(const AnalysisSpec&)> validate;
    /// The types that list "stacks" (names under /stacks) instead of "norms".
    std::vector<std::string> stack_types;
    /// Whether an entry (its own keys validated) may list a data entry more than once: an
    /// analysis that takes its data in order as successive steps (apply with "sequential":
    /// true). Null: no entry may.
    std::function<bool(const AnalysisSpec&)> repeats_data;
    /// How an analysis type takes a data entry listed twice, for the message that refuses a
    /// repeat ("with \"sequential\": true, each listing is one more step"); "" when it never
    /// does. Null: "" for every type.
    std::function<std::string(const std::string& type)> repeats_data_how;
};

/// A parsed config. Maps are keyed by name; *_order keep the config's order for reports.
struct Config {
    std::string file;                    ///< as the user named it (messages)
    std::filesystem::path base_dir;      ///< the config's folder: data paths resolve here
    Json json;                           ///< the config as resolved (after --set overrides)
    std::string name;
    std::uint64_t seed = 0;
    DType dtype = DType::float32;
    std::vector<std::string> data_order;
    std::map<std::string, Json> data;    ///< raw data specs, built by make_batch
    std::vector<std::string> norm_order;
    std::map<std::string, NormDef> norms;
    std::vector<std::string> stack_order;
    std::map<std::string, StackDef> stacks;  ///< "stacks" (optional): residual stacks of those norms
    std::vector<AnalysisSpec> analyses;
    std::optional<std::string> output_dir;  ///< "output": {"dir": ...}, relative to the cwd
};

/// Parses a config document. `file` names it in messages; relative paths inside it resolve
/// against `base_dir`. Throws InputError with file and JSON pointer: unknown keys (with
/// did-you-mean), wrong types, eps < 0, unknown norm types/conventions/analyses, references
/// to undefined data or norms, empty data/norms/analyses, a norm or stack listed twice in one
/// analysis, and a data entry listed twice unless `analyses.repeats_data` allows it; each
/// analysis entry is checked with `analyses.validate` as it is read.
Config parse_config(const Json& j, const std::string& file, const std::filesystem::path& base_dir,
                    const AnalysisCatalog& analyses);

/// A note on a config that run and validate print (not an error): where and why.
struct ConfigNote {
    JsonLocation at;                   ///< the setting it is about
    std::string reason;                ///< why it changes nothing, or what it does here
    std::vector<std::string> related;  ///< pointers of the other values it depends on (JsonError::related)
    /// "file: pointer: reason".
    std::string message() const { return at.message(reason); }
};

/// Notes on `c` that run and validate print (not errors), one line each as
/// "file: /norms[/<name>/<key>]: why" (ConfigNote::message): settings that are valid but change nothing in it,
/// `affine_rounding: "twice"` on a float32/float64 run (only half outputs are rounded after
/// the affine step) or on a norm without affine parameters, `compute` on a run of another
/// dtype than float32; and, on a float32 run where
/// `default_arithmetic` (default_compute(): this CPU's) is the double path, that norms without
/// `compute` take it.
std::vector<ConfigNote> config_notes(const Config& c, Compute default_arithmetic = default_compute());

/// Notes on the norms of analyses of `c` on their data (`batches`, by data name, as built):
/// a BatchNorm, InstanceNorm or GroupNorm under the "keras" or "flax" convention whose
/// channel axis is axis 1 of data of rank 3 or more by default alone (neither the norm nor
/// the data entry gives channel_axis). Keras's and Flax's layers take the last axis by
/// default, so a port of channels-last data that forgets channel_axis normalises over the
/// wrong axes without an error. One note per norm and input shape, naming every data entry
/// of that shape it meets, at the norm's "convention".
std::vector<ConfigNote> channel_axis_notes(const Config& c, const std::map<std::string, Batch>& batches);

/// The keys a norm object of `type` may hold (type and the common keys first), with their
/// defaults as `normlab list` prints them. parse_norm declares exactly these.
const std::vector<KeyInfo>& norm_keys(NormType type);

/// Parses one norm object (/norms/<name>). `seed` seeds random parameter inits.
NormDef parse_norm(const std::string& name, const Json& j, const JsonLocation& loc,
                   const std::filesystem::path& base_dir, std::uint64_t seed);

/// The keys a stack object (/stacks/<name>) may hold, with their defaults as `normlab list`
/// prints them. parse_stack declares exactly these.
const std::vector<KeyInfo>& stack_keys();

/// Parses one stack object (/stacks/<name>): layers, placement, norm (an entry of `norms`),
/// block, hidden, activation, init, weights ({"<w|w1|w2>": {"npy": path}}, paths against
/// base_dir), alpha, beta, final_norm. Throws InputError with file and JSON pointer: unknown
/// keys, an unknown norm (with did-you-mean), keys that do not apply to the placement or
/// block, and given weights whose rank, layer axis or hidden size is wrong (their D is
/// checked when the stack meets its data).
StackDef parse_stack(const std::string& name, const Json& j, const JsonLocation& loc,
                     const std::filesystem::path& base_dir, const std::map<std::string, NormDef>& norms,
                     const std::vector<std::string>& norm_order);
/// Where the key a StackError names sits in config `file`: /stacks/<name>[/<key>].
JsonLocation stack_location(const std::string& file, const StackError& e);

/// The JSON pointers of data entry `name`'s keys that decide its shape, channel axis and
/// mask ("/data/<name>/shape", ...; data_shape_keys) as the related values of an error found
/// when a norm or stack met that data (JsonError::related); none for "". An override of the
/// entry's mean or std is not one of them; one of the whole entry is (their ancestor).
std::vector<std::string> data_related(const std::string& name);

/// The JSON pointers of norm entry `name`'s keys that decide which statistics and
/// parameters it has ("/norms/<name>/type", .../affine, .../track_running_stats), as the
/// related values of an error about what the norm can give (a save of running statistics
/// it does not keep). An override of its eps is not one of them; one of the whole entry is.
std::vector<std::string> norm_kind_related(const std::string& name);

/// Calls f(); a StackError from it is thrown again as the JsonError a user of config `file`
/// reads: "file: /stacks/<name>/<key>: message", related to the data the stack met, or to
/// /dtype when the run's dtype is what failed.
template <class F>
auto locate_stack_errors(const std::string& file, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const StackError& e) {
        stack_location(file, e).fail(e.what(), e.on_dtype() ? std::vector<std::string>{"/dtype"} : data_related(e.data()));
    }
}

/// Where `key` of a norm sits, given where the norm was written: `norm` itself for "",
/// norm/<key> otherwise (a key "param_axes/1" is the pointer norm/param_axes/1).
JsonLocation norm_key_location(const JsonLocation& norm, const std::string& key);
/// Where the key a NormError names sits (norm_key_location).
JsonLocation norm_location(const JsonLocation& norm, const NormError& e);
/// The same for a norm of config `file`: file, /norms/<e.norm()>[/<e.key()>].
JsonLocation norm_location(const std::string& file, const NormError& e);

/// Calls f(); a NormError from it is thrown again as the JsonError a user of config `file`
/// reads: "file: /norms/<name>/<key>: message" (the engine knows no JSON, the config does),
/// related to the data the norm met, so that a data shape set by an override names it, to
/// the key's whole value, so that an override of part of it (--set
/// norms.bn.running_var.npy=v.npy) is named for that value's error, and to the norm's other
/// keys the message depends on (NormError::related_keys: --set norms.ln.axes=[1,2] for a
/// param_axes entry the new axes leave out).
template <class F>
auto locate_norm_errors(const std::string& file, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const NormError& e) {
        const JsonLocation at = norm_location(file, e);
        std::vector<std::string> related = data_related(e.data());
        if (!e.key().empty()) related.push_back(at.pointer);
        for (const std::string& k : e.related_keys())
            related.push_back(norm_key_location(JsonLocation{"", "/norms"}.child(e.norm()), k).pointer);
        at.fail(e.what(), related);
    }
}

/// Calls f(); a NormError from it is thrown again as the InputError a command-line user
/// reads: "<option>: <reason>", where `options` maps the NormDef key at fault to the option
/// that set it, as typed ({"num_groups", "shapes --num-groups 2"}), and `fallback` names the
/// option blamed for any other key ("shapes --norm groupnorm"). E.g. "shapes --num-groups 2:
/// expected channels (C=3) to be divisible by num_groups (2), but got input of shape ...".
template <class F>
auto locate_option_errors(const std::string& fallback, const std::map<std::string, std::string>& options, F&& f)
    -> decltype(f()) {
    try {
        return f();
    } catch (const NormError& e) {
        // An entry of a list ("param_axes/1") is blamed on the option that gave the list.
        const std::string key = e.key().substr(0, e.key().find('/'));
        const auto it = options.find(key);
        if (it == options.end()) throw InputError(fallback + ": " + e.reason());
        // The option names the key: "--channel-axis 5: axis 5 out of range", not "...: channel_axis: axis 5 ...".
        const std::string own = key + ": ";
        const bool repeats = e.reason().compare(0, own.size(), own) == 0;
        throw InputError(it->second + ": " + (repeats ? e.reason().substr(own.size()) : e.reason()));
    }
}

/// The norm type called `name` by command-line option `option` ("bench --norm"). InputError
/// "<option>: unknown norm type "x" (did you mean "y"?)" otherwise, or without a close name
/// "... (expected batchnorm, ...)".
NormType norm_type_option(const std::string& option, const std::string& name);

/// Refuses command-line option `option`, which sets config key `key`, when none of `types`
/// takes that key (norm_keys), as the config refuses it as an unknown key: InputError
/// "<option>: only groupnorm takes it, and --norm is <norms>" (the types that take it, in
/// norm_type_names order). `norms`: --norm as typed.
void check_option_taken(const std::string& option, const std::string& key, const std::vector<NormType>& types,
                        const std::string& norms);

/// "3,64,64": integers as a command-line list option takes them, for messages.
std::string option_list(const std::vector<long long>& v);

}  // namespace normlab
