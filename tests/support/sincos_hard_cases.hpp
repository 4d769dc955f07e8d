// Worst cases for rounding sin in binary64 below 0.5: the start of V. Lefevre's testlibm list
// (as CORE-MATH's sin.wc holds it; 46-59 identical bits after the rounding bit). Shared by
// test_rl_envs ("env_sincos returns glibc's sincos bits") and bench/rl/bench_sincos_error,
// which check env_sincos (and measure glibc) on them with both signs.
#pragma once

namespace herd_test {

inline constexpr double kSinHardCases[] = {
    0x1.00874a5f9fc33p-13, 0x1.009ee184a02e7p-8,  0x1.00aeab577dc9ap-11, 0x1.00e730f98fd44p-9, 0x1.00f620e3203b4p-7,
    0x1.0102947e7003bp-3,  0x1.013b76f655be4p-4,  0x1.015b4fa4d915bp-14, 0x1.01a1c30445418p-4, 0x1.01a9891dd8e91p-4,
    0x1.0202c01ab4668p-11, 0x1.0274e0d9c490bp-15, 0x1.0285070f9f1bcp-5,  0x1.02a31aed55ef6p-9, 0x1.02a936ee9e7cfp-13,
    0x1.03749c462134ep-3,  0x1.038f3177e2192p-11, 0x1.039d88c480fccp-22, 0x1.0438976472dfcp-4, 0x1.0518fffe634f2p-2,
    0x1.0aedf4dd4ccf8p-2,  0x1.0c907e3aeb72cp-2,  0x1.17ea5cdc2dfabp-2,  0x1.191e692fcac47p-2, 0x1.19b39fb3a447ep-2,
    0x1.1c63df63d59dp-2,   0x1.1cbccdb599edp-2,   0x1.1faa24029ef88p-2,  0x1.21deffc5e2111p-2, 0x1.2272b995ca84ap-2,
    0x1.229c6ccf46682p-2,  0x1.25dcb19204258p-3,  0x1.2b3f86f782cdfp-3,  0x1.2cbe1bf2e4468p-2, 0x1.2f30447b2a812p-2,
    0x1.2fc3d8d81b559p-3,  0x1.2fe531ebd1be7p-2,  0x1.30298cd0ac51bp-2,  0x1.303e1f5abbc63p-3, 0x1.31186acde9643p-2,
    0x1.3202fc34125edp-3,  0x1.33f34f531009dp-3,  0x1.371594f92fd3ap-3,  0x1.39a95a2c262ecp-3, 0x1.39ef0f2c94fd9p-3,
    0x1.3af769a61402cp-2,  0x1.4057b989ba51dp-2,  0x1.4085c64d5e72ap-3,  0x1.4598e584b6597p-2, 0x1.45bd134f258cp-2,
    0x1.46c69bc213672p-2,  0x1.48ec07043dc8dp-3,  0x1.4bd5ae7357bc8p-3,  0x1.4dea6a76b5613p-3, 0x1.4fe4ec9e946a4p-2,
    0x1.547e3c7a54b9ap-3,  0x1.54ae5f22747a7p-3,  0x1.556dd5f9b78e2p-3,  0x1.5be9b845889efp-3, 0x1.5bfca0aa697edp-3,
    0x1.5c322c932742dp-3,  0x1.5f4b582359617p-2,  0x1.5f89ae3484752p-3,  0x1.62237044f17fep-3, 0x1.64114261c604fp-3,
    0x1.657e99b004799p-3,  0x1.685e3181dbe4bp-3,  0x1.6ae78685ff6d4p-3,  0x1.6b750f7a7c116p-2, 0x1.6e240ad3dcd12p-3,
};

}  // namespace herd_test
