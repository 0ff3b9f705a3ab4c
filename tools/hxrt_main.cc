// hxrt: command-line front end of the runtime.
#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"hxrt: heterogeneous execution runtime for LLM inference"};
  app.require_subcommand(1);
  int exit_code = 0;
  hxrt::tools::add_devices_command(app, &exit_code);
  hxrt::tools::add_demo_command(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
