#pragma once
/// @file atomic_file.hpp
/// Crash-safe file replacement: write to a temporary file in the same folder, fsync it,
/// rename it over the destination, fsync the folder (DESIGN.md §4 "Everything
/// restartable"). After a crash at any moment the destination is either the old complete
/// file or the new complete file, never a mixture.
///
/// Thread-safety: the functions are reentrant; two writers of the same destination race
/// (the last rename wins, both files complete).

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace herd::io {

/// A fresh temporary name next to `path`: "<path>.tmp.<pid>.<counter>".
std::string temp_path_for(const std::string& path);

/// fsyncs the file at `path`. @throws IoError
void fsync_path(const std::string& path);

/// fsyncs the folder that holds `path` (so a rename in it is durable). @throws IoError
void fsync_parent_folder(const std::string& path);

/// fsyncs `temp_path`, renames it to `final_path` (same folder), fsyncs the folder.
/// @throws IoError (the temporary file is then left for the caller to remove)
void publish_file(const std::string& temp_path, const std::string& final_path);

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync folder).
/// @throws IoError; on failure `path` is unchanged and the temporary file removed.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes);

/// Reads a whole file. @throws IoError when it cannot be opened or read.
std::vector<std::byte> read_file_bytes(const std::string& path);

}  // namespace herd::io
