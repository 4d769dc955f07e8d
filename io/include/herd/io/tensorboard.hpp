#pragma once
/// @file tensorboard.hpp
/// A writer of TensorBoard event files (scalars only), without TensorFlow or protobuf:
/// the record framing and the few protobuf fields are encoded here by hand.
///
/// Format (TensorFlow's `tensorflow/core/lib/io/record_writer.cc` and
/// `tensorflow/core/util/event.proto`, `framework/summary.proto`): a file is a sequence of
/// TFRecords, each `uint64 length` (little-endian), `uint32 masked_crc32c(length bytes)`,
/// `data`, `uint32 masked_crc32c(data)`; masked_crc(x) = ((c >> 15) | (c << 17)) +
/// 0xa282ead8 with c the CRC-32C (Castagnoli) of x. Each record's data is one serialized
/// `Event` {1: double wall_time, 2: int64 step, 3: string file_version, 5: Summary
/// summary, 7: SessionLog session_log}; `Summary` {1: repeated Value value}; `Value`
/// {1: string tag, 2: float simple_value}; `SessionLog` {1: enum status, START = 1}. The
/// first record of a file is an Event with `file_version = "brain.Event:2"`.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "herd/io/log_file.hpp"

namespace herd::io {

/// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected, initial and final XOR
/// 0xFFFFFFFF; RFC 3720 §12.1 and Appendix B.4) of `bytes`. Thread-safe.
std::uint32_t crc32c(std::string_view bytes);

/// TFRecord's masked CRC-32C of `bytes`: ((c >> 15) | (c << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(std::string_view bytes);

/// `data` framed as one TFRecord (length, masked CRC of the length, data, masked CRC of
/// the data; integers little-endian).
std::string tfrecord(std::string_view data);

/// One scalar of a summary: a tag ("train/value_loss") and its value (written as float32,
/// TensorBoard's `simple_value`).
struct TbScalar {
  std::string tag;  ///< name shown by TensorBoard; '/' groups tags into sections
  double value;     ///< value (NaN and infinities are written as such)
};

/// Serialized `Event` with `file_version` (the first event of every file).
std::string tb_file_version_event(double wall_time, std::string_view version = "brain.Event:2");
/// Serialized `Event` at `step` with a `Summary` of `scalars`.
std::string tb_scalars_event(double wall_time, std::int64_t step, const std::vector<TbScalar>& scalars);
/// Serialized `Event` at `step` with `SessionLog{status: START}`: TensorBoard (which reads
/// such files with purge_orphaned_data, its default) then drops the events of earlier
/// files of the run with step >= `step`, i.e. those written after the checkpoint a run
/// resumed from.
std::string tb_session_start_event(double wall_time, std::int64_t step);

/// Seconds since the Unix epoch (the `wall_time` of events).
double unix_time_seconds();

/// Writes one event file in a folder; rank-local, not thread-safe.
class TensorBoardWriter {
 public:
  /// Makes `dir` (and missing parents) and a new file `dir/events.out.tfevents.<unix
  /// seconds>.<host name>` (".<n>" appended, n = 2, 3, ..., while that name exists), and
  /// writes the file-version event. @throws herd::IoError naming the folder or file.
  explicit TensorBoardWriter(const std::string& dir);
  /// Appends one event of `scalars` at `step` as one record (one `write()`).
  /// @throws herd::IoError
  void add_scalars(std::int64_t step, const std::vector<TbScalar>& scalars, double wall_time = unix_time_seconds());
  /// Appends a SessionLog START event at `step` (see `tb_session_start_event`): written
  /// by a resumed run before its first scalars. @throws herd::IoError
  void add_session_start(std::int64_t step, double wall_time = unix_time_seconds());
  /// The event file's path.
  const std::string& path() const noexcept { return file_.path(); }

 private:
  LogFile file_;
};

}  // namespace herd::io
