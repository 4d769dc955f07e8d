// The host backend's build of dqn_kernels.cu (herd/core/cuda/launch.hpp): the same CUDA
// source compiled as C++ with HERD_HOST_EMU, for the host-emu test executables.
#include "../dqn_kernels.cu"
