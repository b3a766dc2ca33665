// vLLM's -tp/-pp/-dp rewritten to the long names of the subcommand that has
// them; an alias its subcommand lacks is a usage error naming both.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include "base/error.hpp"
#include "tools/twinserve/short_aliases.hpp"

using twin::cli::expand_short_aliases;
using Words = std::vector<std::string>;

namespace {

struct TestApp {
  CLI::App app{"t"};
  int tp = 1, pp = 1;
  TestApp() {
    auto* sim = app.add_subcommand("simulate");
    sim->add_option("--tp,--tensor-parallel-size", tp);
    sim->add_option("--pp,--pipeline-parallel-size", pp);
    auto* trace = app.add_subcommand("trace");
    trace->add_subcommand("convert")->add_option("--tp,--tensor-parallel-size", tp);
    app.add_subcommand("models");
  }
};

}  // namespace

TEST_CASE("short aliases become the subcommand's long names") {
  TestApp t;
  CHECK(expand_short_aliases(t.app, Words{"simulate", "-tp", "4", "-pp=2"}) ==
        Words{"simulate", "--tensor-parallel-size", "4", "--pipeline-parallel-size=2"});
  // Nested subcommands are followed; other words pass through untouched.
  CHECK(expand_short_aliases(t.app, Words{"trace", "convert", "a", "-tp", "2", "--x"}) ==
        Words{"trace", "convert", "a", "--tensor-parallel-size", "2", "--x"});
  // After "--" the words are positionals.
  CHECK(expand_short_aliases(t.app, Words{"simulate", "--", "-tp"}) == Words{"simulate", "--", "-tp"});
  // Words that only start like an alias are not aliases.
  CHECK(expand_short_aliases(t.app, Words{"simulate", "-tpx", "-t"}) == Words{"simulate", "-tpx", "-t"});
}

TEST_CASE("an alias the subcommand has no long name for is a usage error naming both") {
  TestApp t;
  CHECK_THROWS_AS(expand_short_aliases(t.app, Words{"models", "-tp", "2"}), twin::UsageError);
  CHECK_THROWS_WITH(expand_short_aliases(t.app, Words{"simulate", "-dp", "2"}),
                    Catch::Contains("-dp") && Catch::Contains("--data-parallel-size") && Catch::Contains("simulate"));
  CHECK_THROWS_WITH(expand_short_aliases(t.app, Words{"-tp", "2"}), Catch::Contains("twinserve"));
}
