// Subcommands of the hxrt CLI. Each registers its options on the app and runs when selected.
#pragma once

#include <CLI/CLI.hpp>

namespace hxrt::tools {

// Registers `hxrt devices`: drivers and devices with their capabilities.
void add_devices_command(CLI::App& app, int* exit_code);
// Registers `hxrt demo`: streams, events and the memory pool at work on one device.
void add_demo_command(CLI::App& app, int* exit_code);
// Registers `hxrt run`: a graph file or ONNX model on .npy inputs, outputs written as .npy, timed.
void add_run_command(CLI::App& app, int* exit_code);
// Registers `hxrt inspect`: the execution plan of a graph file or ONNX model (kernels and why, fusion, streams,
// memory; for ONNX, what each node became).
void add_inspect_command(CLI::App& app, int* exit_code);
// Registers `hxrt convert`: an ONNX model imported and saved as an hxrt graph file.
void add_convert_command(CLI::App& app, int* exit_code);
// Registers `hxrt profile`: a graph file run N times with the profiler; summary table and Chrome trace.
void add_profile_command(CLI::App& app, int* exit_code);
// Registers `hxrt generate`: text generation with a GGUF model (the default model is fetched on first use).
void add_generate_command(CLI::App& app, int* exit_code);
// Registers `hxrt chat`: an interactive chat with a GGUF model.
void add_chat_command(CLI::App& app, int* exit_code);
// Registers `hxrt perplexity`: a GGUF model's perplexity on a text file, as llama-perplexity measures it.
void add_perplexity_command(CLI::App& app, int* exit_code);
// Registers `hxrt serve`: the OpenAI-compatible HTTP server.
void add_serve_command(CLI::App& app, int* exit_code);

}  // namespace hxrt::tools
