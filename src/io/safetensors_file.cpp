// SafetensorsFile: open, map read-only, validate, hand out tensors that view the mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "core/log.h"
#include "io/safetensors.h"

namespace strata::io {

// The whole file, mapped once. Tensors hold it through their keepalive.
struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (addr) ::munmap(addr, bytes);
  }
};

namespace {

// Closes the descriptor on every path; the mapping stays valid after close.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO must not hang the open; fstat below refuses it (mmap ignores the flag).
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
  const auto size = static_cast<size_t>(st.st_size);
  // mmap cannot map zero bytes; the parser reports a too-short file with its own message.
  if (size < 8) parse_safetensors_header(nullptr, size, path);

  auto m = std::make_shared<Mapping>();
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (addr == MAP_FAILED) fail("{}: cannot map {} bytes: {}", path, size, std::strerror(errno));
  m->addr = addr;
  m->bytes = size;

  SafetensorsFile file;
  file.path_ = path;
  file.header_ = parse_safetensors_header(static_cast<const uint8_t*>(addr), size, path);
  file.mapping_ = std::move(m);
  file.index_.reserve(file.header_.tensors.size());
  for (size_t i = 0; i < file.header_.tensors.size(); ++i)
    file.index_.emplace(file.header_.tensors[i].name, i);
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

Tensor SafetensorsFile::tensor(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (!info) fail("{}: no tensor \"{}\" in this file", path_, name);
  auto* base = static_cast<uint8_t*>(mapping_->addr) + info->data_offset;
  // Zero-byte tensors have nothing to misalign.
  if (info->nbytes == 0 || reinterpret_cast<uintptr_t>(base) % dtype_size(info->dtype) == 0)
    return Tensor::wrap(base, info->shape, info->dtype, Device::Host,
                        std::const_pointer_cast<Mapping>(mapping_));
  Tensor copy = Tensor::empty(info->shape, info->dtype, Device::Host);
  std::memcpy(copy.raw(), base, info->nbytes);
  *copied_bytes_ += info->nbytes;
  log::warn("{}: tensor \"{}\" is stored at unaligned file offset {} for {}; copied {} bytes",
            path_, info->name, info->data_offset, dtype_name(info->dtype), info->nbytes);
  return copy;
}

size_t SafetensorsFile::mapped_bytes() const {
  return mapping_ ? mapping_->bytes : 0;
}

}  // namespace strata::io
