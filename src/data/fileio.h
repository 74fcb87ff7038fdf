#pragma once
// Whole-file reads with clear errors, and atomic writes (core/atomic_file.h: temporary file in the same
// directory, fsync, rename): a reader never sees a half-written file and a failed write leaves the old file
// untouched.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace mlalpha {

// The bytes of a regular, non-empty file. Errors: "<path>: no such file", "<path>: is a directory, expected
// a file", "<path>: is not a regular file (a device, FIFO or socket) ..." (checked before opening: a FIFO
// would block, /dev/urandom never end), "<path>: file is empty", "<path>: cannot read: <reason>".
std::string read_file_bytes(const std::string& path);

// The size of a regular, non-empty file, with the same errors as read_file_bytes.
size_t regular_file_size(const std::string& path);

// Writes `bytes` to `path` atomically (an AtomicFile written and committed). On failure the temporary file is
// removed and `path` is unchanged; the error names the path, the step that failed and the system's reason.
void write_file_atomic(const std::string& path, std::string_view bytes);
// The same for bytes in several pieces, written in order (a header and a large array, without joining them).
void write_file_atomic(const std::string& path, std::initializer_list<std::string_view> parts);

}  // namespace mlalpha
