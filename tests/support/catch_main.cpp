// Catch2 main for plain test executables.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
