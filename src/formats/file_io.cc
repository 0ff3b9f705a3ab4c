#include "formats/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hxrt/base/fault_injection.h"

namespace hxrt::formats {

Status io_error(std::string_view what, const std::string& path, int err) {
  const std::string message = fmt::format("{} '{}': {}", what, path, std::strerror(err));
  return err == ENOENT ? Status(StatusCode::kNotFound, message) : Status(StatusCode::kUnavailable, message);
}

MappedFile::~MappedFile() { ::munmap(address_, size_); }

Result<std::shared_ptr<const MappedFile>> map_file(const std::string& path, std::string_view kind,
                                                   bool prefetch) {
  HXRT_RETURN_IF_ERROR(fault::check(fault::Site::kFileOpen, [&] { return fmt::format("{} '{}'", kind, path); }));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(fmt::format("cannot open {}", kind), path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(fmt::format("cannot stat {}", kind), path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("{} path '{}' is not a regular file", kind, path);
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return data_loss("{} '{}' is empty", kind, path);
  }
  if (Status injected = fault::check(fault::Site::kFileMap, [&] { return fmt::format("{} '{}'", kind, path); });
      !injected.ok()) {
    ::close(fd);
    return injected;
  }
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | (prefetch ? MAP_POPULATE : 0), fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (address == MAP_FAILED) return io_error(fmt::format("cannot map {}", kind), path, err);
  return std::make_shared<const MappedFile>(address, size);
}

Status write_file_atomically(const std::string& path, std::string_view kind,
                             const std::function<Status(const ByteSink&)>& emit) {
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  HXRT_RETURN_IF_ERROR(fault::check(fault::Site::kFileOpen, [&] { return fmt::format("{} '{}'", kind, temp); }));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot create {}", kind), temp, errno);
  Status status = emit([&](std::span<const std::byte> bytes) -> Status {
    HXRT_RETURN_IF_ERROR(fault::check(fault::Site::kFileWrite, [&] { return fmt::format("{} '{}'", kind, temp); }));
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error(fmt::format("cannot write {}", kind), temp, errno);
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
    return ok_status();
  });
  if (::close(fd) != 0 && status.ok()) status = io_error(fmt::format("cannot write {}", kind), temp, errno);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = io_error(fmt::format("cannot create {}", kind), path, errno);
  }
  if (!status.ok()) ::unlink(temp.c_str());
  return status;
}

}  // namespace hxrt::formats
