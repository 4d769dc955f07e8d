#pragma once
// Shared by the io fuzzers: a schema that covers every value type, so that parsed input also
// exercises validation, conversion and message formatting.
#include "herd/io/schema.hpp"

namespace herd::fuzz {

inline const herd::io::Schema& schema() {
  static const herd::io::Schema s = [] {
    herd::io::Schema sc("fuzz");
    sc.add_int("chain_size", 1000, "states").min(1).alias("chainSize");
    sc.add_float("target", 0.234, "rate").range(0, 1).alias("targetAcceptanceRate");
    sc.add_string("method", "dram", "method").choices({"dram", "am", "dr"});
    sc.add_bool("overwrite", false, "overwrite").alias("overwriteRequested");
    sc.add_float_list("start", std::vector<double>{0, 0}, "start").length(1, 8).alias("startPointVec");
    sc.add_int_list("seeds", std::nullopt, "seeds");
    sc.add_bool_list("flags", std::nullopt, "flags");
    sc.add_string_list("outputs", std::vector<std::string>{"chain"}, "outputs").choices({"chain", "sample"});
    sc.add_float("proposal.scale", 2.38, "scale").min(0, true);
    sc.add_string("model", std::nullopt, "model").required();
    sc.add_float_matrix("cov", std::vector<std::vector<double>>{{1, 0}, {0, 1}}, "covariance")
        .length(1, 4)
        .alias("proposalStartCovMat");
    return sc;
  }();
  return s;
}

}  // namespace herd::fuzz
