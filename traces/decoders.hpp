#pragma once
// The decompressing ByteSources (gzip_source.cpp, zstd_source.cpp), built
// by open_byte_source once the magic bytes have named the format.
#include <memory>

#include "traces/byte_source.hpp"
#include "traces/raw_file.hpp"

namespace twin {

std::unique_ptr<ByteSource> make_gzip_source(std::unique_ptr<RawFile> file);
std::unique_ptr<ByteSource> make_zstd_source(std::unique_ptr<RawFile> file);

}  // namespace twin
