// twinserve: the command line front end. Exit codes: 0 ok, 2 usage error,
// 1 runtime error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "tools/twinserve/cli_app.hpp"
#include "tools/twinserve/interrupt_guard.hpp"

int main(int argc, char** argv) {
  CLI::App app{"twinserve: a digital twin of an LLM serving cluster.\n"
               "One serving core runs in a real inference engine and in a discrete-event\n"
               "simulator, so predictions can be checked against live runs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "twinserve 0.1");

  twin::cli::install_commands(app);

  try {
    app.name(argv[0]);  // as parse(argc, argv) names it, for the usage lines
    twin::cli::parse_words(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const twin::cli::Interrupted& e) {
    std::cerr << "twinserve: " << e.what() << "\n";
    return 128 + e.signal;
  } catch (const twin::UsageError& e) {
    std::cerr << "twinserve: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    // Not a bare "std::bad_alloc": what holds memory, and the knob for it.
    std::cerr << "twinserve: error: out of memory. A run holds the requests in flight and waiting: with every "
                 "request sent at once (--request-rate inf, --asap) that is the whole trace; --max-concurrency N "
                 "bounds it (docs/engine.md, \"twinserve run\")\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "twinserve: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
