// The C interface: a ParaMonte C driver (compiled as C) runs DRAM from a namelist file or
// from input text, writes ParaDRAM outputs, and reports bad input with status 2.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <catch2/catch.hpp>

#include "herd/io/hdf5.hpp"

extern "C" int c_driver_paramonte(char* input_file);
extern "C" int c_driver_herd(const char* input);

namespace fs = std::filesystem;

TEST_CASE("C API: runParaDRAM from a namelist file and herd_run_dram from text", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string prefix = (dir / "sub" / "folder" / "run").string();  // missing folders are created
  const fs::path nml = dir / "paradram.nml";
  std::ofstream(nml) << "&ParaDRAM\n  chainSize = 5000\n  randomSeed = 11\n  outputFileName = '" << prefix
                     << "'\n  startPointVec = 0.0d0, 0.0d0\n  variableNameList = 'a', 'b'\n/\n";
  std::string path = nml.string();
  REQUIRE(c_driver_paramonte(path.data()) == 0);
  CHECK(fs::exists(prefix + "_chain.txt"));
  CHECK(fs::exists(prefix + "_report.txt"));
  {
    auto f = herd::io::H5File::open(prefix + ".h5");
    const auto a = f.open_dataset("posterior/a").read<double>();
    const auto b = f.open_dataset("posterior/b").read<double>();
    double ma = 0, mb = 0;
    for (double x : a) ma += x;
    for (double x : b) mb += x;
    ma /= static_cast<double>(a.size());
    mb /= static_cast<double>(b.size());
    // Loose design checks (|error| < ~0.3 and ~0.9 are over 5 MCSE for these chain lengths).
    CHECK(std::abs(ma - 1.0) < 0.3);
    CHECK(std::abs(mb + 2.0) < 0.9);
  }
  // Running the same input again: the run is complete (its restart record says so), so it is
  // reported, not redone (ParaDRAM's restart behaviour): status 0, outputs untouched.
  {
    std::ifstream in(prefix + "_report.txt");
    const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(c_driver_paramonte(path.data()) == 0);
    std::ifstream again(prefix + "_report.txt");
    CHECK(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()) == report);
  }
  // Another input on the same outputs does not overwrite them: status 2.
  std::ofstream(nml) << "&ParaDRAM\n  chainSize = 4000\n  randomSeed = 11\n  outputFileName = '" << prefix
                     << "'\n  startPointVec = 0.0d0, 0.0d0\n  variableNameList = 'a', 'b'\n/\n";
  CHECK(c_driver_paramonte(path.data()) == 2);
  // TOML text as input, with overwrite.
  const std::string toml = "chain_size = 500\nrandom_seed = 3\noverwrite = true\noutput_prefix = \"" + prefix + "\"\n";
  CHECK(c_driver_herd(toml.c_str()) == 0);
  // Namelist text as input.
  const std::string text = "&ParaDRAM chainSize = 300, overwriteRequested = T, outputFileName = '" + prefix + "' /";
  CHECK(c_driver_herd(text.c_str()) == 0);
  // Bad input: status 2.
  CHECK(c_driver_herd("chain_size = -5\n") == 2);
  CHECK(c_driver_herd("/no/such/input.nml") == 2);
  // Batched devices are herd-sample's only (issue #13): status 2, nothing written.
  const std::string batched = "device = \"cpu_batched\"\noutput_prefix = \"" + (dir / "batched" / "run").string() + "\"\n";
  CHECK(c_driver_herd(batched.c_str()) == 2);
  CHECK(!fs::exists(dir / "batched"));
}
