// HDF5 layer: round trips of every element type and attribute kind, appending blocks,
// compression, dimension scales, byte-identical files, atomic files, clear errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/hdf5.hpp"
#include "temp_dir.hpp"

using namespace herd::io;
using herd::test::TempDir;

namespace {

template <class T>
std::vector<T> iota_vec(std::size_t n, T start) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i));
  return v;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <class T>
void round_trip_type(H5Group& g, const std::string& name, T start) {
  const auto v = iota_vec<T>(12, start);
  g.write(name, v, {3, 4});
  H5Dataset ds = g.open_dataset(name);
  CHECK(ds.shape() == std::vector<hsize_t>{3, 4});
  CHECK(ds.read<T>() == v);
  g.write_scalar(name + "_scalar", start);
  CHECK(g.open_dataset(name + "_scalar").shape().empty());
  CHECK(g.read<T>(name + "_scalar") == std::vector<T>{start});
}

}  // namespace

TEST_CASE("hdf5: datasets of every type round-trip", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("types.h5");
  {
    H5File f = H5File::create(path);
    H5Group g = f.require_group("data/nested");
    round_trip_type<double>(g, "f64", -1.5);
    round_trip_type<float>(g, "f32", 2.25f);
    round_trip_type<std::int32_t>(g, "i32", -7);
    round_trip_type<std::int64_t>(g, "i64", std::int64_t{1} << 40);
    round_trip_type<std::uint8_t>(g, "u8", 3);
    round_trip_type<std::uint32_t>(g, "u32", 4000000000u);
    round_trip_type<std::uint64_t>(g, "u64", std::uint64_t{1} << 63);
    g.write_strings("names", {"alpha", "", "gamma with spaces", "ünïcode"});
  }
  H5File f = H5File::open(path);
  CHECK(f.root().is_group("data"));
  CHECK(f.root().is_group("data/nested"));
  CHECK(f.root().is_dataset("data/nested/f64"));
  CHECK_FALSE(f.root().contains("data/missing/x"));
  H5Group g = f.open_group("data/nested");
  CHECK(g.read<double>("f64") == iota_vec<double>(12, -1.5));
  CHECK(g.read<std::int64_t>("i64") == iota_vec<std::int64_t>(12, std::int64_t{1} << 40));
  CHECK(g.open_dataset("names").read_strings() ==
        std::vector<std::string>{"alpha", "", "gamma with spaces", "ünïcode"});
  CHECK(g.open_dataset("names").kind() == H5Kind::kString);
  CHECK(g.open_dataset("i32").kind() == H5Kind::kInteger);
  // Numeric conversion on read, as HDF5 does it.
  CHECK(g.read<double>("i32") == iota_vec<double>(12, -7.0));
  auto members = g.members();
  CHECK(members.size() == 15);
  CHECK(std::is_sorted(members.begin(), members.end()));
}

TEST_CASE("hdf5: attributes of every kind round-trip", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("attrs.h5");
  {
    H5File f = H5File::create(path);
    H5Group root = f.root();
    root.set_attribute("title", "a run");
    root.set_attribute("seed", std::uint64_t{12345678901234ULL});
    root.set_attribute("scale", 0.25);
    root.set_attribute("count", std::int32_t{-3});
    root.set_attribute("fscale", 1.5f);
    root.set_attribute("vec", std::vector<double>{1, 2, 3});
    root.set_attribute("ivec", std::vector<std::int64_t>{-1, 0, 1});
    root.set_attribute("labels", std::vector<std::string>{"a", "bb", "ccc"});
    root.set_attribute("title", std::string_view("replaced"));
    H5Dataset ds = root.write("x", std::vector<double>{1, 2});
    ds.set_attribute("units", "m/s");
  }
  H5File f = H5File::open(path);
  H5Group root = f.root();
  CHECK(root.attribute_string("title") == "replaced");
  CHECK(root.attribute<std::uint64_t>("seed") == 12345678901234ULL);
  CHECK(root.attribute<double>("scale") == 0.25);
  CHECK(root.attribute<std::int32_t>("count") == -3);
  CHECK(root.attribute<float>("fscale") == 1.5f);
  CHECK(root.attribute<double>("count") == -3.0);
  CHECK(root.attribute_vector<double>("vec") == std::vector<double>{1, 2, 3});
  CHECK(root.attribute_vector<std::int64_t>("ivec") == std::vector<std::int64_t>{-1, 0, 1});
  CHECK(root.attribute_strings("labels") == std::vector<std::string>{"a", "bb", "ccc"});
  CHECK(root.attribute_kind("labels") == H5Kind::kString);
  CHECK(root.has_attribute("vec"));
  CHECK_FALSE(root.has_attribute("nope"));
  CHECK(root.attribute_names().size() == 8);
  CHECK(f.open_dataset("x").attribute_string("units") == "m/s");
  CHECK_THROWS_AS(root.attribute<double>("nope"), herd::IoError);
  CHECK_THROWS_AS(root.attribute<double>("vec"), herd::IoError);    // not a scalar
  CHECK_THROWS_AS(root.attribute<double>("title"), herd::IoError);  // not numeric
}

TEST_CASE("hdf5: extendible datasets grow by appending blocks", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("append.h5");
  const std::size_t d = 3;
  std::vector<double> all;
  {
    H5File f = H5File::create(path);
    DatasetOptions opt{.extendible = true, .compression = 4};  // docs/io.md's form: no -Wextra warning
    H5Dataset ds = f.root().create_dataset<double>("chain", {0, d}, opt);
    CHECK(ds.shape() == std::vector<hsize_t>{0, d});
    for (int block = 0; block < 50; ++block) {
      std::vector<double> rows((static_cast<std::size_t>(block) % 7 + 1) * d);
      for (auto& x : rows) x = static_cast<double>(all.size()) * 0.5, all.push_back(x);
      ds.append(rows);
    }
    CHECK_THROWS_AS(ds.append(std::vector<double>{1.0, 2.0}), herd::InputError);  // not whole rows
    H5Dataset fixed = f.root().write("fixed", std::vector<double>{1, 2, 3});
    CHECK_THROWS_AS(fixed.append(std::vector<double>{1.0}), herd::InputError);
  }
  H5File f = H5File::open(path);
  H5Dataset ds = f.open_dataset("chain");
  REQUIRE(ds.shape() == std::vector<hsize_t>{all.size() / d, d});
  CHECK(ds.read<double>() == all);
  auto rows = ds.read_rows<double>(5, 4);
  CHECK(rows == std::vector<double>(all.begin() + 15, all.begin() + 27));
  CHECK_THROWS_AS(ds.read_rows<double>(all.size() / d, 1), herd::InputError);
}

TEST_CASE("hdf5: compression shrinks a compressible dataset", "[io]") {
  TempDir tmp;
  std::vector<double> zeros(100000, 1.0);
  {
    H5File f = H5File::create(tmp.file("plain.h5"));
    f.root().write("z", zeros);
  }
  {
    H5File f = H5File::create(tmp.file("zip.h5"));
    DatasetOptions opt;
    opt.compression = 6;
    f.root().write("z", zeros, {}, opt);
  }
  CHECK(slurp(tmp.file("zip.h5")).size() * 10 < slurp(tmp.file("plain.h5")).size());
  CHECK(H5File::open(tmp.file("zip.h5")).root().read<double>("z") == zeros);
}

TEST_CASE("hdf5: equal data gives byte-identical files", "[io]") {
  TempDir tmp;
  auto write = [](const std::string& path) {
    H5File f = H5File::create(path);
    H5Group post = f.require_group("posterior");
    post.create_coordinate("chain", std::vector<std::int64_t>{0, 1});
    post.create_coordinate("draw", std::vector<std::int64_t>{0, 1, 2});
    H5Dataset x = post.write("x", std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
    post.attach_dimensions(x, {"chain", "draw"});
    post.set_attribute("created_by", "herd");
    DatasetOptions opt;
    opt.extendible = true;
    H5Dataset c = f.root().create_dataset<float>("stream", {0, 2}, opt);
    c.append(std::vector<float>{1, 2, 3, 4});
  };
  write(tmp.file("a.h5"));
  // Let the clock move so that timestamps, if any were written, would differ.
  ::usleep(1100000);
  write(tmp.file("b.h5"));
  const std::string a = slurp(tmp.file("a.h5")), b = slurp(tmp.file("b.h5"));
  CHECK(a.size() > 0);
  CHECK(a == b);
}

TEST_CASE("hdf5: a dataset written block by block holds the bytes of one write", "[io]") {
  TempDir tmp;
  // [chain 2, draw 5, width 3] and [chain 2, draw 5]: values 0, 1, 2, ... in row-major order.
  std::vector<double> v3(30), v2(10);
  std::iota(v3.begin(), v3.end(), 0.0);
  std::iota(v2.begin(), v2.end(), 100.0);
  auto write = [&](const std::string& path, bool blocks) {
    H5File f = H5File::create(path);
    H5Group g = f.root();
    H5Dataset a = g.create_dataset<double>("a", {2, 5, 3});
    H5Dataset b = g.create_dataset<double>("b", {2, 5});
    if (!blocks) {
      a.write(v3);
      b.write(v2);
      return;
    }
    // Each chain's draws in pieces of 2, 2 and 1.
    for (hsize_t c = 0; c < 2; ++c)
      for (hsize_t at = 0; at < 5; at += 2) {
        const hsize_t n = std::min<hsize_t>(2, 5 - at);
        a.write_block<double>({c, at, 0}, {1, n, 3},
                              std::span<const double>(v3).subspan(static_cast<std::size_t>((c * 5 + at) * 3),
                                                                  static_cast<std::size_t>(n * 3)));
        b.write_block<double>(
            {c, at}, {1, n},
            std::span<const double>(v2).subspan(static_cast<std::size_t>(c * 5 + at), static_cast<std::size_t>(n)));
      }
    // Errors: out of range, wrong rank, wrong size.
    CHECK_THROWS_AS(b.write_block<double>({1, 4}, {1, 2}, std::span<const double>(v2).first(2)), herd::InputError);
    CHECK_THROWS_AS(b.write_block<double>({1}, {1}, std::span<const double>(v2).first(1)), herd::InputError);
    CHECK_THROWS_AS(b.write_block<double>({0, 0}, {1, 2}, std::span<const double>(v2).first(3)), herd::InputError);
  };
  write(tmp.file("whole.h5"), false);
  write(tmp.file("blocks.h5"), true);
  CHECK(slurp(tmp.file("whole.h5")) == slurp(tmp.file("blocks.h5")));
  H5File f = H5File::open(tmp.file("blocks.h5"));
  CHECK(f.root().read<double>("a") == v3);
  CHECK(f.root().read<double>("b") == v2);
}

TEST_CASE("hdf5: dimension scales are attached and named", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("scales.h5");
  {
    H5File f = H5File::create(path);
    H5Group post = f.require_group("posterior");
    post.create_coordinate("chain", std::vector<std::int64_t>{0, 1});
    post.create_coordinate("draw", std::vector<std::int64_t>{0, 1, 2});
    post.create_dimension("theta_dim_0", 4);
    H5Dataset x = post.write("theta", std::vector<double>(24, 1.0), {2, 3, 4});
    post.attach_dimensions(x, {"chain", "draw", "theta_dim_0"});
    post.write_variable("v", std::vector<std::int32_t>(6, 7), {"chain", "draw"});
    CHECK_THROWS_WITH(post.write_variable("v2", std::vector<double>(5, 1.0), {"chain", "draw"}),
                      Catch::Contains("/posterior/v2 has 5 elements, but its dimensions (chain, draw) hold 6"));
    CHECK_THROWS_WITH(post.write_variable("v3", std::vector<double>(6, 1.0), {"chain", "drw"}),
                      Catch::Contains("/posterior/drw: no such dataset"));
    H5Dataset bad = post.write("bad", std::vector<double>(6, 1.0), {3, 2});
    CHECK_THROWS_AS(post.attach_dimensions(bad, {"chain"}), herd::InputError);
    CHECK_THROWS_AS(post.attach_dimensions(bad, {"chain", "draw"}), herd::InputError);  // lengths 2, 3 vs 3, 2
  }
  H5File f = H5File::open(path);
  H5Dataset x = f.open_dataset("posterior/theta");
  CHECK(f.open_dataset("posterior/chain").is_scale());
  CHECK_FALSE(x.is_scale());
  auto names = x.dimension_names();
  REQUIRE(names.size() == 3);
  CHECK(names[0] == "chain");
  CHECK(names[1] == "draw");
  CHECK(names[2].rfind("This is a netCDF dimension but not a netCDF variable.", 0) == 0);
  CHECK(f.open_dataset("posterior/v").dimension_names() == std::vector<std::string>{"chain", "draw"});
  CHECK(f.open_dataset("posterior/v").read<std::int32_t>() == std::vector<std::int32_t>(6, 7));
}

TEST_CASE("hdf5: atomic files appear only on commit", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("run.h5");
  {
    H5File f = H5File::create(path);
    f.root().write("v", std::vector<double>{1});
  }
  {
    H5File f = H5File::create_atomic(path);
    H5Group g = f.require_group("g");
    g.write("v", std::vector<double>{2});
    // Not committed: the old file stays.
  }
  CHECK(H5File::open(path).root().read<double>("v") == std::vector<double>{1});
  {
    H5File f = H5File::create_atomic(path);
    H5Group g = f.require_group("g");
    g.write("v", std::vector<double>{2});
    H5File moved = std::move(f);  // moving keeps the temporary file
    H5File again;
    again = std::move(moved);
    again.commit();
  }
  CHECK(H5File::open(path).root().read<double>("g/v") == std::vector<double>{2});
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary files left behind
}

TEST_CASE("hdf5: start_writeback is a hint that leaves the bytes and never throws", "[io]") {
  static_assert(noexcept(std::declval<const H5File&>().start_writeback()));
  static_assert(noexcept(herd::io::start_writeback(std::string())));
  TempDir tmp;
  const std::string path = tmp.file("run.h5");
  std::vector<double> big(1 << 19);  // 4 MiB per dataset
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) * 0.5;
  {
    H5File f = H5File::create_atomic(path);
    f.root().write("a", big);
    f.start_writeback();  // the temporary file's pages (the final path does not exist yet)
    f.root().write("b", std::vector<double>(big.rbegin(), big.rend()));
    f.start_writeback();
    f.sync_data();
    f.commit();
    f.start_writeback();  // committed and closed: nothing to do
  }
  herd::io::start_writeback(tmp.file("missing.h5"));  // no file: nothing to do
  const H5File g = H5File::open(path);
  CHECK(g.root().read<double>("a") == big);
  CHECK(g.root().read<double>("b") == std::vector<double>(big.rbegin(), big.rend()));
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("hdf5: a file made on one thread and used on another prints no HDF5 error stack", "[io]") {
  // HDF5's error printing is per thread in a thread-safe build: a thread that never opened
  // a file itself, given one, must still get exceptions only (herd-sample writes the .h5's
  // draws on a writer thread and its diagnostics on the main thread).
  TempDir tmp;
  H5File f = H5File::create_atomic(tmp.file("run.h5"));
  f.root().write("v", std::vector<double>{1, 2});
  const std::string err_path = tmp.file("stderr.txt");
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(saved >= 0);
  REQUIRE(fd >= 0);
  ::dup2(fd, 2);
  bool threw = false;
  std::thread other([&] {
    // Through herd (the group is opened, so this thread is herd's), then an HDF5 call that
    // fails inside the library, as a write does on a full disk.
    const H5Group root = f.root();
    threw = H5Dopen2(root.id(), "missing", H5P_DEFAULT) < 0;
    f.commit();
  });
  other.join();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  CHECK(threw);
  CHECK(slurp(err_path).empty());
  CHECK(H5File::open(tmp.file("run.h5")).root().read<double>("v") == std::vector<double>{1, 2});
}

TEST_CASE("hdf5: bad use gives clear errors, not crashes", "[io]") {
  TempDir tmp;
  CHECK_THROWS_WITH(H5File::open(tmp.file("missing.h5")), Catch::Contains("no such file"));
  { std::ofstream(tmp.file("text.h5")) << "this is not HDF5\n"; }
  CHECK_THROWS_WITH(H5File::open(tmp.file("text.h5")), Catch::Contains("not an HDF5 file"));
  CHECK_FALSE(H5File::is_hdf5(tmp.file("text.h5")));
  H5File f = H5File::create(tmp.file("ok.h5"));
  CHECK(H5File::is_hdf5(tmp.file("ok.h5")));
  H5Group root = f.root();
  root.write("x", std::vector<double>{1, 2, 3});
  CHECK_THROWS_WITH(root.write("x", std::vector<double>{1}), Catch::Contains("/x") && Catch::Contains("exists"));
  CHECK_THROWS_WITH(root.open_dataset("y"), Catch::Contains("/y: no such dataset"));
  CHECK_THROWS_WITH(root.open_group("x"), Catch::Contains("no such group"));
  CHECK_THROWS_AS(root.write("z", std::vector<double>{1, 2, 3}, {2, 2}), herd::InputError);
  CHECK_THROWS_AS(root.open_dataset("x").read_strings(), herd::IoError);
  CHECK_THROWS_AS(root.create_dataset<double>("s", {}, DatasetOptions{true, {}, 0, true}), herd::InputError);
  CHECK_THROWS_AS(H5File::create(tmp.file("ok.h5"), false), herd::IoError);
  // A name of slashes only names nothing: an error, not parts.back() of an empty split.
  CHECK_THROWS_WITH(root.create_group("/"), Catch::Contains("has only slashes"));
  CHECK_THROWS_WITH(root.create_group("//"), Catch::Contains("has only slashes"));
  CHECK_THROWS_WITH(root.write_scalar<double>("/", 1.0), Catch::Contains("has only slashes"));
}

TEST_CASE("hdf5: truncated files are errors, not crashes", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("full.h5");
  {
    H5File f = H5File::create(path);
    f.require_group("g").write("x", std::vector<double>(5000, 1.5));
  }
  const std::string bytes = slurp(path);
  for (std::size_t keep : {std::size_t{0}, std::size_t{100}, bytes.size() / 2, bytes.size() - 8}) {
    INFO("kept " << keep << " of " << bytes.size() << " bytes");
    const std::string cut = tmp.file("cut.h5");
    { std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(keep)); }
    bool threw = false;
    try {
      H5File f = H5File::open(cut);
      (void)f.open_group("g").read<double>("x");
    } catch (const herd::IoError& e) {
      threw = true;
      CHECK(std::string(e.what()).find("cut.h5") != std::string::npos);
    }
    CHECK(threw);
  }
}
