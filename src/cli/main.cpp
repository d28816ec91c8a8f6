// normlab command line: parses arguments with CLI11, calls the core, maps errors to exit
// codes (0 success, 2 bad input of any kind, 1 failure of the environment).
#include <iostream>

#include <CLI/CLI.hpp>

#include "analysis/analysis.hpp"
#include "cli/run_command.hpp"
#include "data/sources.hpp"
#include "norm/presets.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {

void print_list() {
    std::cout << "norm types:";
    for (const auto& n : norm_type_names()) std::cout << ' ' << n;
    std::cout << "\nconventions:";
    for (const auto& n : convention_names()) std::cout << ' ' << n;
    std::cout << "\ndata sources:";
    for (const auto& n : data_source_names()) std::cout << ' ' << n;
    std::cout << "\nanalyses:\n";
    for (const auto& a : analysis_types()) std::cout << "  " << a.name << ": " << a.summary << '\n';
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"normlab: experiments with normalization layers (BatchNorm, LayerNorm, "
                 "InstanceNorm, GroupNorm, RMSNorm)"};
    app.set_version_flag("--version", "normlab 0.1.0");
    app.require_subcommand(1);

    RunOptions run;
    long long seed = 0;
    std::string out;
    auto* run_cmd = app.add_subcommand("run", "run a config: writes report.json and one CSV per analysis");
    run_cmd->add_option("config", run.config_path, "config file (JSON)")->required();
    run_cmd->add_option("--out", out, "output folder (default: output.dir of the config, else results/<name>)");
    run_cmd->add_option("--seed", seed, "override the config's seed");
    run_cmd->add_option("--set", run.sets, "override a config value: PATH=VALUE (dotted path or JSON pointer; VALUE as JSON)");
    run_cmd->add_flag("--force", run.force, "replace an output folder that does not hold a normlab result");
    run_cmd->add_flag("--quiet,-q", run.quiet, "print nothing on success");

    RunOptions val;
    std::vector<std::string> val_paths;
    auto* val_cmd = app.add_subcommand("validate", "check configs (and their data) without writing anything");
    val_cmd->add_option("configs", val_paths, "config files")->required();
    val_cmd->add_option("--set", val.sets, "override a config value: PATH=VALUE");

    auto* list_cmd = app.add_subcommand("list", "norm types, conventions, data sources and analyses");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);  // prints help/version (0) or the error message
        return code == 0 ? 0 : 2;
    }

    try {
        if (*run_cmd) {
            if (!out.empty()) run.out = out;
            if (run_cmd->count("--seed")) run.seed = seed;
            run_config(run);
        } else if (*val_cmd) {
            for (const auto& p : val_paths) {
                val.config_path = p;
                validate_config(val);
                std::cout << p << ": ok\n";
            }
        } else if (*list_cmd) {
            print_list();
        }
    } catch (const InputError& e) {
        std::cerr << "normlab: error: " << e.what() << '\n';
        return 2;
    } catch (const EnvError& e) {
        std::cerr << "normlab: error: " << e.what() << '\n';
        return 1;
    } catch (const std::bad_alloc&) {
        std::cerr << "normlab: error: out of memory\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "normlab: internal error: " << e.what() << '\n';
        return 1;
    }
    return 0;
}
