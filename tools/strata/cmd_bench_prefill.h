// `strata bench prefill`, a subcommand of `strata bench` (set up by cmd_bench.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace strata::cli {

// Adds the `prefill` subcommand to `bench` and returns it.
CLI::App* setup_bench_prefill(CLI::App* bench);

}  // namespace strata::cli
