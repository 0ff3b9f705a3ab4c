// What the file formats share: POSIX errors as Statuses, read-only whole-file mappings (weights are used in place,
// kept alive by the mapping), and atomic writes (a temporary file renamed over the target).
//
// Thread-safety: stateless functions; a MappedFile is immutable.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "hxrt/base/status.h"

namespace hxrt::formats {

// "<what> '<path>': <strerror>" — NotFound for ENOENT, Unavailable otherwise.
Status io_error(std::string_view what, const std::string& path, int err);

// A read-only private mapping of a whole file; unmapped when the last reference goes.
class MappedFile {
 public:
  MappedFile(void* address, size_t size) : address_(address), size_(size) {}
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(address_), size_}; }

 private:
  void* address_;
  size_t size_;
};

// Maps the regular, non-empty file at `path`. `kind` names it in errors ("graph file", "GGUF file"):
// "cannot open <kind> '<path>': ...", "<kind> path '<path>' is not a regular file", "<kind> '<path>' is empty".
// With `prefetch`, every page is mapped at once (MAP_POPULATE, as llama.cpp's loader does): weights about to be
// computed on then cost no page fault on first touch (the first forward of a 240 MiB model otherwise spends 5-10%
// of its time faulting), at the price of reading the whole file now.
Result<std::shared_ptr<const MappedFile>> map_file(const std::string& path, std::string_view kind,
                                                   bool prefetch = false);

// Writes what `emit` produces (it calls the sink with consecutive chunks) to `path` through a temporary file in the
// same directory, renamed over `path` only when everything was written; on failure nothing is left behind.
using ByteSink = std::function<Status(std::span<const std::byte>)>;
Status write_file_atomically(const std::string& path, std::string_view kind,
                             const std::function<Status(const ByteSink&)>& emit);

}  // namespace hxrt::formats
