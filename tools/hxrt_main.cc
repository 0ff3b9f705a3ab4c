// hxrt: command-line front end of the runtime. Exit status: 0 on success, 1 when the command fails (the Status is
// printed to stderr), 2 on a usage error (unknown option, missing argument).
#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"hxrt: heterogeneous execution runtime for LLM inference"};
  app.require_subcommand(1);
  int exit_code = 0;
  hxrt::tools::add_devices_command(app, &exit_code);
  hxrt::tools::add_demo_command(app, &exit_code);
  hxrt::tools::add_run_command(app, &exit_code);
  hxrt::tools::add_inspect_command(app, &exit_code);
  hxrt::tools::add_profile_command(app, &exit_code);
  hxrt::tools::add_convert_command(app, &exit_code);
  hxrt::tools::add_generate_command(app, &exit_code);
  hxrt::tools::add_chat_command(app, &exit_code);
  hxrt::tools::add_perplexity_command(app, &exit_code);
  hxrt::tools::add_serve_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; usage errors exit 2, leaving 1 to errors of the command itself.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
