// normlab command line: parses arguments with CLI11, calls the core, maps errors to exit
// codes (0 success, 2 bad input of any kind, 1 failure of the environment). Data goes to
// stdout, messages to stderr.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>

#include <CLI/CLI.hpp>

#include "json/reader.hpp"
#include "json/text.hpp"
#include "norm/engine.hpp"
#include "run/bench.hpp"
#include "run/bench_stack.hpp"
#include "run/listing.hpp"
#include "run/merge.hpp"
#include "run/report_command.hpp"
#include "run/run_command.hpp"
#include "run/safety.hpp"
#include "run/shapes_command.hpp"
#include "tensor/errors.hpp"
#include "tensor/numbers.hpp"
#include "tensor/tensor.hpp"

using namespace normlab;

namespace {

// "32,3,64,64" -> {32, 3, 64, 64}; CLI11's own vector parsing wants spaces or repeats.
CLI::Option* add_list(CLI::App* app, const std::string& name, std::optional<std::vector<long long>>& target,
                      const std::string& help) {
    return app->add_option_function<std::string>(name, [&target, name](const std::string& s) {
        std::vector<long long> v;
        std::stringstream ss(s);
        std::string tok;
        while (std::getline(ss, tok, ',')) {
            try {
                std::size_t used = 0;
                v.push_back(std::stoll(tok, &used));
                if (used != tok.size()) throw std::invalid_argument(tok);
            } catch (const std::exception&) {
                throw CLI::ValidationError(name, "expected comma-separated integers, but got " + quoted_text(s));
            }
        }
        target = v;
    }, help);
}

// An integer option, checked against its range when it is used: every refusal then reads
// like normlab's other input errors ("normlab: error: --threads 0: ...", exit 2), and no
// value means something the help does not say (--threads 0 is not "all cores").
long long integer_option(const std::string& name, const std::string& text, long long lo, long long hi,
                         const std::string& hint = "") {
    std::string range = "an integer";
    if (lo > std::numeric_limits<long long>::min() && hi < std::numeric_limits<long long>::max())
        range += " from " + std::to_string(lo) + " to " + std::to_string(hi);
    else if (lo > std::numeric_limits<long long>::min())
        range += " >= " + std::to_string(lo);
    long long v = 0;
    try {
        std::size_t used = 0;
        v = std::stoll(text, &used);
        if (used != text.size()) throw std::invalid_argument(text);
    } catch (const std::out_of_range&) {
        // Digits beyond a 64-bit integer: an integer still, and where the range is open on
        // a side, its limit is the 64-bit one, which is said.
        const bool open = lo == std::numeric_limits<long long>::min() || hi == std::numeric_limits<long long>::max();
        throw InputError(name + " " + text + ": expected " + range + hint +
                         (open ? ", at most " + std::to_string(std::numeric_limits<long long>::max()) + " in magnitude"
                               : std::string()));
    } catch (const std::exception&) {
        throw InputError(name + " " + text + ": expected " + range + hint);
    }
    if (v < lo || v > hi) throw InputError(name + " " + text + ": expected " + range + hint);
    return v;
}

// A finite number option of magnitude at most `limit`, checked as integer_option checks
// integers. Decimal digits, sign, point and exponent only: std::stod alone would also take
// hexadecimal ("0x1p3") and blanks before the digits.
double number_option(const std::string& name, const std::string& text, double limit) {
    const std::string range = "a number from " + format_number(-limit) + " to " + format_number(limit);
    double v = 0;
    try {
        std::size_t used = 0;
        if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos)
            throw std::invalid_argument(text);
        v = std::stod(text, &used);
        if (used != text.size()) throw std::invalid_argument(text);
    } catch (const std::exception&) {
        throw InputError(name + " " + text + ": expected " + range);
    }
    if (!(std::abs(v) <= limit)) throw InputError(name + " " + text + ": expected " + range);
    return v;
}

// The option names `cmd` accepts, as typed: "--threads", "-q", ...
std::vector<std::string> option_names(const CLI::App* cmd) {
    std::vector<std::string> names;
    for (const CLI::Option* opt : cmd->get_options()) {
        for (const auto& n : opt->get_lnames()) names.push_back("--" + n);
        for (const auto& n : opt->get_snames()) names.push_back("-" + n);
    }
    return names;
}

// What an option takes, for messages: its CLI11 type name in words ("INT": "an integer").
std::string value_kind(const CLI::Option& opt) {
    if (opt.get_expected_max() == 0) return "no value (a flag) or true/false";
    const std::string type = opt.get_type_name();
    if (type == "INT") return "an integer";
    if (type == "UINT") return "a non-negative integer";
    if (type == "FLOAT") return "a number";
    if (type == "DIR") return "a value (a folder)";
    if (type == "FILE") return "a value (a file)";
    if (type.empty() || type == "TEXT") return "a value";
    return "a value (" + type + ")";
}

// A command-line error as normlab's other errors read: one line saying which command, what
// was wrong and where the help is. CLI11's own texts ("A subcommand is required", "The
// following arguments were not expected: 2 --thread") lack the command and the prefix.
std::string usage_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
    CLI::App* cmd = nullptr;
    for (CLI::App* sub : app.get_subcommands()) cmd = sub;
    std::vector<std::string> commands;
    for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
    if (!cmd) {  // no command recognised: name what was typed instead
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            if (a.empty() || a[0] != '-')
                return "unknown command " + quoted_text(a) + did_you_mean_note(a, commands, 2) + "; see normlab --help";
        }
        if (argc > 1) return "unknown option " + quoted_text(argv[1]) + " (give a command first); see normlab --help";
        std::string list;
        for (const auto& c : commands) list += (list.empty() ? "" : ", ") + c;
        return "a command is required: " + list + "; see normlab --help";
    }
    const std::string where = cmd->get_name() + ": ";
    const std::string help = "; see normlab " + cmd->get_name() + " --help";
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
        std::vector<std::string> options, others;
        for (const auto& a : app.remaining(true)) (a.size() > 1 && a[0] == '-' ? options : others).push_back(a);
        if (!options.empty()) {
            const std::string word = options.front().substr(0, options.front().find('='));
            const auto names = option_names(cmd);
            // Keras's and Flax's "axis" is the channel axis of a BatchNorm and the normalized
            // axis of a LayerNorm: both options are the guess.
            if (word == "--axis" && std::count(names.begin(), names.end(), "--channel-axis") &&
                std::count(names.begin(), names.end(), "--axes"))
                return where + "unknown option \"--axis\" (did you mean \"--channel-axis\" for batchnorm, instancenorm "
                               "and groupnorm, or \"--axes\" for layernorm and rmsnorm?)" + help;
            return where + "unknown option " + quoted_text(word) + did_you_mean_note(word, names, 4) + help;
        }
        std::string list;
        for (const auto& a : others) list += (list.empty() ? "" : " ") + quoted_text(a);
        return where + (others.size() == 1 ? "unexpected argument " : "unexpected arguments ") + list + help;
    }
    // An option that takes one value, given more often: CLI11 says "--out: At Most 1 required
    // but received 2", which reads as if the value were wrong. The values it kept say what
    // was typed. Options meant to repeat (--set, --where, bench --shape) never get here.
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
        const std::string msg = e.what();
        if (const CLI::Option* opt = cmd->get_option_no_throw(msg.substr(0, msg.find(':')))) {
            const auto& values = opt->results();
            const std::size_t most = static_cast<std::size_t>(std::max(opt->get_items_expected_max(), 1));
            if (values.size() > most) {
                // Quoted when a value would blur the list: "--shape 2,3 --shape 4,5".
                const bool quote = std::any_of(values.begin(), values.end(), [](const std::string& v) {
                    return v.empty() || v.find_first_of(", ") != std::string::npos;
                });
                std::string list;
                for (const auto& v : values) list += (list.empty() ? "" : ", ") + (quote ? quoted_text(v) : v);
                const std::string times = values.size() == 2 ? "twice" : std::to_string(values.size()) + " times";
                return cmd->get_name() + " " + opt->get_name() + ": given " + times + " (" + list + "); give it once";
            }
        }
    }
    // CLI11's "Could not convert: --seed = abc" and "--out: 1 required TEXT missing" start
    // from the option's name; its type name says what it takes.
    if (dynamic_cast<const CLI::ConversionError*>(&e) || dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
        const std::string msg = e.what(), convert = "Could not convert: ";
        std::string name, got;
        if (msg.rfind(convert, 0) == 0) {
            const std::size_t eq = msg.find(" = ", convert.size());
            name = msg.substr(convert.size(), eq - convert.size());
            if (eq != std::string::npos) got = msg.substr(eq + 3);
        } else {
            name = msg.substr(0, msg.find(':'));
        }
        if (const CLI::Option* opt = cmd->get_option_no_throw(name))
            return cmd->get_name() + " " + name + ": expected " + value_kind(*opt) +
                   (got.empty() ? "" : ", but got " + quoted_text(got)) + help;
    }
    return where + e.what() + help;
}

// Engine threads: at least one; the bound keeps a typo (100000) from starting a thread per chunk.
constexpr long long kMaxThreads = 1024;
constexpr long long kNoMin = std::numeric_limits<long long>::min();
constexpr long long kNoMax = std::numeric_limits<long long>::max();

// The options run and validate share that are read as text: --out, --seed, --shard and
// --threads of `cmd` into `r` (and the engine's thread count), checked alike for both.
void take_run_options(const CLI::App& cmd, RunOptions& r, const std::string& out, const std::string& seed,
                      const std::string& shard, const std::string& threads) {
    // Counted, not tested for "": --out "" and --shard "" are refused, not taken as absent.
    if (cmd.count("--out")) r.out = out;
    if (cmd.count("--shard")) r.shard = shard;
    if (cmd.count("--seed")) r.seed = integer_option(cmd.get_name() + " --seed", seed, kNoMin, kNoMax);  // < 0: the config refuses it
    if (cmd.count("--threads"))
        set_engine_threads(static_cast<unsigned>(
            integer_option("--threads", threads, 1, kMaxThreads, " (leave it out to use all cores)")));
}

// The command line's work; main checks that what it wrote to stdout arrived.
int run_cli(int argc, char** argv) {
    CLI::App app{"normlab: experiments with normalization layers (BatchNorm, LayerNorm, "
                 "InstanceNorm, GroupNorm, RMSNorm)"};
    app.set_version_flag("--version", "normlab 0.1.0");
    app.require_subcommand(1);

    RunOptions run;
    // Text, checked by integer_option: CLI11 saturates an out-of-range integer silently.
    std::string seed;
    std::string out, shard;
    auto* run_cmd = app.add_subcommand("run", "run a config: writes report.json, report.html and one CSV per analysis");
    run_cmd->add_option("config", run.config_path, "config file (JSON); - reads it from standard input")->required();
    run_cmd->add_option("--out", out, "output folder (default: output.dir of the config, else results/<name>)")
        ->type_name("DIR");
    run_cmd->add_option("--seed", seed, "override the config's seed, >= 0")->type_name("INT");
    run_cmd->add_option("--set", run.sets, "override a config value: PATH=VALUE (dotted path or JSON pointer; VALUE as JSON)")
        ->type_name("PATH=VALUE");
    run_cmd->add_option("--unset", run.unsets, "remove a config key so that its default applies (before the --set values): PATH")
        ->type_name("PATH");
    run_cmd->add_option("--shard", shard, "run every N-th sweep point: I/N with 0 <= I < N")->type_name("I/N");
    run_cmd->add_option("--max-memory", run.max_memory, "refuse a config estimated to need more memory: 8G, 512M, 75% (of RAM) or none (default: 50% of RAM)")
        ->type_name("SIZE");
    std::string run_threads;
    run_cmd->add_option("--threads", run_threads, "engine threads, 1 to 1024 (default: all cores; results are identical for any count)")
        ->type_name("INT");
    run_cmd->add_flag("--dry-run", run.dry_run, "validate and print the plan (data, norms, analyses, points, memory); write nothing");
    run_cmd->add_flag("--force", run.force, "replace an output folder that does not hold a normlab result");
    run_cmd->add_flag("--quiet,-q", run.quiet, "print nothing on success");

    RunOptions val;
    std::vector<std::string> val_paths;
    auto* val_cmd = app.add_subcommand("validate", "check configs (and their data), writing nothing: reports each, "
                                       "exits 2 if any is refused, else 1 if one could not be checked");
    val_cmd->add_option("configs", val_paths, "config files; - reads one from standard input")->required();
    // run's options, so that "run" can be replaced by "validate" in a command: each is checked as run checks it.
    std::string val_out, val_seed, val_shard, val_threads;
    val_cmd->add_option("--out", val_out, "output folder, as for run: checked as run checks it, not created")->type_name("DIR");
    val_cmd->add_option("--seed", val_seed, "override the config's seed, as for run")->type_name("INT");
    val_cmd->add_option("--set", val.sets, "override a config value: PATH=VALUE")->type_name("PATH=VALUE");
    val_cmd->add_option("--unset", val.unsets, "remove a config key: PATH")->type_name("PATH");
    val_cmd->add_option("--shard", val_shard, "check only this shard's sweep points, as run --shard runs them: I/N")
        ->type_name("I/N");
    val_cmd->add_option("--max-memory", val.max_memory, "memory limit, as for run")->type_name("SIZE");
    val_cmd->add_option("--threads", val_threads, "engine threads, as for run")->type_name("INT");
    val_cmd->add_flag("--force", val.force, "accept an output folder that run --force would replace");

    auto* list_cmd = app.add_subcommand("list", "norm types and their keys, stacks, conventions, data sources and analyses");

    ShapesOptions sh;
    std::optional<std::vector<long long>> sh_shape;
    std::string sh_groups, sh_channel;
    auto* shapes_cmd = app.add_subcommand("shapes", "statistics shape of one norm on one input shape");
    add_list(shapes_cmd, "--shape", sh_shape, "input shape, e.g. 32,3,64,64")->required();
    shapes_cmd->add_option("--norm", sh.norm, "batchnorm, layernorm, instancenorm, groupnorm or rmsnorm")->required();
    add_list(shapes_cmd, "--normalized-shape", sh.normalized_shape, "trailing dims (layernorm, rmsnorm), e.g. 3,64,64");
    add_list(shapes_cmd, "--axes", sh.axes, "reduction axes (layernorm, rmsnorm), e.g. -1 or 1,2");
    add_list(shapes_cmd, "--param-axes", sh.param_axes,
             "normalized axes the weight and bias span (layernorm, rmsnorm; default all), e.g. -1");
    shapes_cmd->add_option("--num-groups", sh_groups, "groups (groupnorm), >= 1")->type_name("INT");
    shapes_cmd->add_option("--channel-axis", sh_channel, "channel axis (default 1; negative counts from the end)")
        ->type_name("INT");
    shapes_cmd->add_flag("--json", sh.json, "one JSON object instead of key: value lines");

    std::string tmpl = "minimal", init_out;
    bool init_force = false;
    const std::string templates = join_words(template_names());
    auto* init_cmd = app.add_subcommand("init", "write a starter config (templates: " + templates + ")");
    init_cmd->add_option("template", tmpl, "template name: " + templates + " (default: minimal)")->type_name("TEMPLATE");
    init_cmd->add_option("-o,--output", init_out, "file to write (default: stdout)")->type_name("FILE");
    init_cmd->add_flag("--force", init_force, "overwrite an existing file");

    std::string merge_out;
    std::vector<std::string> merge_dirs;
    bool merge_force = false;
    auto* merge_cmd = app.add_subcommand("merge", "combine the folders of a sharded sweep into one");
    merge_cmd->add_option("OUT", merge_out, "output folder")->required();
    merge_cmd->add_option("SHARD_DIR", merge_dirs, "shard folders, one per shard run (--shard I/N)")->required();
    merge_cmd->add_flag("--force", merge_force, "replace an output folder that does not hold a normlab result");

    std::string report_dir;
    auto* report_cmd = app.add_subcommand("report", "write report.html and figures/*.vl.json for an existing result folder");
    report_cmd->add_option("dir", report_dir, "result folder (of run or merge)")->required();

    ShowOptions show;
    std::string show_dir, show_columns;
    std::vector<std::string> show_where;
    auto* show_cmd = app.add_subcommand("show", "print a result's tables aligned for the terminal");
    show_cmd->add_option("dir", show_dir, "result folder")->required();
    show_cmd->add_option("analysis", show.analysis, "one analysis type (default: every table)");
    show_cmd->add_option("--columns", show_columns, "comma-separated columns to print, in this order");
    show_cmd->add_option("--where", show_where, "keep rows whose COLUMN equals VALUE: COLUMN=VALUE (repeatable)")
        ->type_name("COLUMN=VALUE");
    show_cmd->add_flag("--full", show.table.full, "numbers in full (default: 6 significant digits) and long text uncut");

    BenchOptions bench;
    std::vector<std::string> bench_shapes;
    std::string bench_norms, bench_threads, bench_repeat, bench_min_time, bench_groups, bench_channel_axis, bench_mean;
    auto* bench_cmd = app.add_subcommand("bench", "forward-pass throughput against a plain copy of the same bytes; "
                                         "--stack: a residual stack's forward and backward against plain products");
    bench_cmd->add_option("--norm", bench_norms, "comma-separated norm types (default: all five)");
    bench_cmd->add_option("--shape", bench_shapes, "input shape, e.g. 32,64,512 (repeatable; default: transformer and conv-net shapes per norm, the default benchmark suite)");
    bench_cmd->add_option("--dtype", bench.dtype, "float32 or float64 (default float32); --stack: also a comma-separated "
                          "list, each timed in turn (default float32,float64)");
    bench_cmd->add_option("--compute", bench.compute, "float32 data: float (the float path) or double; default: float where the CPU has FMA "
                          "instructions, else double");
    bench_cmd->add_option("--threads", bench_threads, "comma-separated thread counts, each 1 to 1024 (default: 1 and all cores)");
    bench_cmd->add_option("--repeat", bench_repeat, "timed repetitions per case, >= 1 (default 20)")->type_name("INT");
    bench_cmd->add_option("--min-time-ms", bench_min_time,
                          "time more repetitions until this many milliseconds have passed, per measurement, 0 to 600000 (default 0: --repeat alone; not --stack)")
        ->type_name("INT");
    bench_cmd->add_option("--num-groups", bench_groups, "groups for groupnorm, >= 1 (default 32)")->type_name("INT");
    bench_cmd->add_option("--channel-axis", bench_channel_axis,
                          "channel axis for batchnorm/instancenorm/groupnorm (default 1; -1: channels last)")
        ->type_name("INT");
    bench_cmd->add_option("--data-mean", bench_mean,
                          "mean of the data timed, uniform over mean - 2 to mean + 2 (default 0): statistics far from 0 "
                          "take their moments about a shift, a little more arithmetic")
        ->type_name("NUMBER");
    bench_cmd->add_flag("--json", bench.json, "one JSON object per case (channel_axis and num_groups: those the norm used, "
                        "null for a norm that takes none)");
    bool bench_stack = false;
    StackBenchOptions stack_bench;
    bench_cmd->add_flag("--stack", bench_stack,
                        "forward+backward of a residual ffn stack against plain xt::linalg::dot products");
    // Read as text and checked by integer_option: CLI11 takes "-3" for a size_t as a wrapped
    // huge size.
    std::string stack_layers, stack_rows, stack_features, stack_hidden;
    bench_cmd->add_option("--layers", stack_layers, "--stack: blocks, >= 1 (default 48)")->type_name("INT");
    bench_cmd->add_option("--rows", stack_rows, "--stack: rows N, >= 1 (default 1024)")->type_name("INT");
    bench_cmd->add_option("--features", stack_features, "--stack: features D, >= 1 (default 512)")->type_name("INT");
    bench_cmd->add_option("--hidden", stack_hidden, "--stack: ffn hidden size H, >= 1 (default 2048)")->type_name("INT");
    bench_cmd->add_option("--placement", stack_bench.placement, "--stack: pre, post, deepnorm, sandwich, none, norm_only");
    bench_cmd->add_option("--stack-norm", stack_bench.norm, "--stack: layernorm, rmsnorm or batchnorm");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        std::cerr << "normlab: error: " << one_line(usage_error(app, e, argc, argv)) << '\n';
        return 2;
    }

    try {
        if (*run_cmd) {
            take_run_options(*run_cmd, run, out, seed, shard, run_threads);
            run_config(run);
        } else if (*val_cmd) {
            take_run_options(*val_cmd, val, val_out, val_seed, val_shard, val_threads);
            // Standard input holds one config: a second "-" would read it empty.
            if (std::count(val_paths.begin(), val_paths.end(), "-") > 1)
                throw InputError("validate: - given more than once; standard input holds one config");
            // Every config gets its verdict: one bad file must not hide the state of the next.
            // Exit 2 if one is refused, else 1 if one could not be checked (an unreadable folder).
            int refused = 0, unchecked = 0;
            for (const auto& p : val_paths) {
                val.config_path = p;
                // With several configs, an error that does not start with its config's path
                // (an --out or --set refusal, results/<name>) is prefixed with it.
                auto error = [&](const char* what) {
                    const std::string text = what;  // a config's own errors start with its path as given
                    const bool named = val_paths.size() == 1 || text.rfind(p + ": ", 0) == 0 ||
                                       text.rfind(p + " (standard input)", 0) == 0;
                    std::cerr << "normlab: error: " << one_line(named ? text : plain_or_quoted(p) + ": " + text) << '\n';
                };
                try {
                    const ConfigFindings f = validate_config(val);
                    print_messages("note", f.notes);
                    print_messages("warning", f.warnings);
                    std::cout << plain_or_quoted(p) << ": ok\n";
                } catch (const InputError& e) {
                    error(e.what());
                    ++refused;
                } catch (const EnvError& e) {
                    error(e.what());
                    ++unchecked;
                }
            }
            if (refused) return 2;
            if (unchecked) return 1;
        } else if (*list_cmd) {
            std::cout << list_text();
        } else if (*shapes_cmd) {
            sh.shape = *sh_shape;
            if (shapes_cmd->count("--num-groups")) sh.num_groups = integer_option("shapes --num-groups", sh_groups, 1, kNoMax);
            if (shapes_cmd->count("--channel-axis")) sh.channel_axis = integer_option("shapes --channel-axis", sh_channel, kNoMin, kNoMax);
            std::cout << shapes_answer(sh);
        } else if (*init_cmd) {
            if (!init_cmd->count("--output")) std::cout << template_text(tmpl);
            else write_template(tmpl, init_out, init_force);
        } else if (*bench_cmd) {
            auto split = [](const std::string& s) {
                std::vector<std::string> v;
                std::stringstream ss(s);
                std::string t;
                while (std::getline(ss, t, ',')) v.push_back(t);
                return v;
            };
            if (bench_cmd->count("--repeat"))
                bench.repeat = static_cast<unsigned>(integer_option("bench --repeat", bench_repeat, 1, 1000000));
            if (bench_cmd->count("--min-time-ms"))
                bench.min_time_ms = static_cast<double>(integer_option("bench --min-time-ms", bench_min_time, 0, 600000));
            if (bench_stack) {
                // The norm benchmark's options say nothing about a stack: refused, not ignored.
                for (const char* opt : {"--norm", "--shape", "--compute", "--threads", "--min-time-ms", "--num-groups",
                                        "--channel-axis", "--data-mean"})
                    if (bench_cmd->count(opt))
                        throw InputError(std::string("bench --stack: ") + opt + " does not apply to the stack benchmark" +
                                         (std::string(opt) == "--norm" ? " (its norm: --stack-norm)" : ""));
                stack_bench.json = bench.json;
                if (bench_cmd->count("--repeat")) stack_bench.repeat = bench.repeat;
                if (bench_cmd->count("--dtype")) stack_bench.dtypes = split(bench.dtype);
                if (stack_bench.dtypes.empty()) throw InputError("bench --dtype: expected float32 or float64, but got \"\"");
                const std::pair<const char*, std::string*> sizes[] = {{"--layers", &stack_layers}, {"--rows", &stack_rows},
                                                                      {"--features", &stack_features}, {"--hidden", &stack_hidden}};
                std::size_t* targets[] = {&stack_bench.layers, &stack_bench.rows, &stack_bench.features, &stack_bench.hidden};
                for (std::size_t k = 0; k < 4; ++k)
                    if (bench_cmd->count(sizes[k].first))
                        *targets[k] = static_cast<std::size_t>(
                            integer_option(std::string("bench ") + sizes[k].first, *sizes[k].second, 1, kNoMax));
                std::cout << run_stack_bench(stack_bench);
                return 0;
            }
            for (const char* opt : {"--layers", "--rows", "--features", "--hidden", "--placement", "--stack-norm"})
                if (bench_cmd->count(opt))
                    throw InputError(std::string("bench ") + opt + ": applies to the stack benchmark only (add --stack)");
            // The norm benchmark times one dtype per run; a list is the stack benchmark's.
            if (bench.dtype.find(',') != std::string::npos)
                throw InputError("bench --dtype " + bench.dtype +
                                 ": expected float32 or float64 (a comma-separated list is taken with --stack only; "
                                 "run bench once per dtype)");
            bench.norms = split(bench_norms);
            if (bench_cmd->count("--norm") && bench.norms.empty())
                throw InputError("bench --norm: expected comma-separated norm types, but got \"\"");
            if (bench_cmd->count("--compute") && bench.compute.empty())
                throw InputError("bench --compute: expected float or double, but got \"\"");
            if (bench_cmd->count("--channel-axis"))
                bench.channel_axis = integer_option("bench --channel-axis", bench_channel_axis, kNoMin, kNoMax);
            if (bench_cmd->count("--data-mean")) bench.data_mean = number_option("bench --data-mean", bench_mean, 1e30);
            if (bench_cmd->count("--num-groups"))
                bench.num_groups = static_cast<unsigned>(integer_option("bench --num-groups", bench_groups, 1, 1u << 30));
            if (bench_cmd->count("--threads") && split(bench_threads).empty())
                throw InputError("bench --threads: expected comma-separated thread counts, but got \"\"");
            for (const auto& t : split(bench_threads))
                bench.threads.push_back(static_cast<unsigned>(integer_option("bench --threads", t, 1, kMaxThreads)));
            for (const auto& s : bench_shapes) {
                std::vector<long long> dims;
                for (const auto& t : split(s)) dims.push_back(integer_option("bench --shape", t, 1, kNoMax));
                if (dims.empty()) throw InputError("bench --shape: expected comma-separated dims, e.g. 32,64,512, but got \"\"");
                bench.shapes.push_back(dims);
            }
            std::cout << run_bench(bench);
        } else if (*merge_cmd) {
            merge_results(merge_out, merge_dirs, merge_force);
        } else if (*report_cmd) {
            const auto written = write_report(report_dir);
            // A message, as run's and merge's summaries are: stderr, so stdout carries data only.
            std::cerr << "normlab: report: " << count_noun(written.size(), "file") << " written to " << plain_or_quoted(report_dir) << "\n";
            for (const auto& p : written) std::cerr << "  " << plain_or_quoted(p.string()) << "\n";
        } else if (*show_cmd) {
            std::stringstream ss(show_columns);
            std::string col;
            while (std::getline(ss, col, ',')) show.table.columns.push_back(col);
            for (const auto& w : show_where) show.table.where.push_back(parse_where(w));
            std::cout << show_result(show_dir, show);
        }
    } catch (const InputError& e) {
        std::cerr << "normlab: error: " << one_line(e.what()) << '\n';
        return 2;
    } catch (const EnvError& e) {
        std::cerr << "normlab: error: " << one_line(e.what()) << '\n';
        return 1;
    } catch (const std::bad_alloc&) {
        std::string why;
        if (*run_cmd && run.max_memory == "none")
            why = ": an allocation failed, and --max-memory none had turned off the check that refuses a config "
                  "whose estimated memory is too large; give a limit (e.g. --max-memory 50%) to have it refused "
                  "before it runs";
        else if (*run_cmd)
            why = ": an allocation failed although the config's estimated memory was within --max-memory (by "
                  "default half of the RAM); this process may have less (ulimit -v, a container's limit): give "
                  "--max-memory what it has, to have such a config refused before it runs";
        std::cerr << "normlab: error: out of memory" << why << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "normlab: internal error: " << one_line(e.what()) << '\n';
        return 1;
    }
    return 0;
}

// The exit code of a command whose stdout (results, `init`'s template, `shapes` answers)
// could not be written, as on a full disk: 1 with a message, not 0 with an empty file, as
// coreutils do (close_stdout). `code` when the command failed already or stdout is fine.
int checked_stdout(int code) {
    errno = 0;
    std::cout.flush();
    const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
    if (!failed) return code;
    const int why = errno;
    std::cerr << "normlab: error: standard output: write failed" << (why ? std::string(": ") + std::strerror(why) : "")
              << '\n';
    return code ? code : 1;
}

}  // namespace

int main(int argc, char** argv) {
    install_interrupt_handler();  // Ctrl-C/SIGTERM/SIGHUP: remove unfinished results, end by the signal
    return checked_stdout(run_cli(argc, argv));
}
