// The simulator tests' main: GoogleTest's, after retainFreedHeap (the tests simulate thousands of plans, as tessel does).
#include "tessel/sim/heap.hpp"

#include <gtest/gtest.h>

int main(int argc, char** argv) {
    tessel::sim::retainFreedHeap();
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
