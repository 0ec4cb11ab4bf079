// Training data: byte-level tokens of a text, cut into sequences deterministically so that every plan sees
// the same global batch (data-parallel rank d of D takes sequences [d B/D, (d+1) B/D) of each step). Every
// context-parallel rank of a replica gets the same full micro-batch; the model picks its own positions.
#pragma once

#include "tessel/exec/runtime.hpp"

#include <string>

namespace tessel::exec {

// Sequence g of step s starts at a position drawn from (seed, s, g) in the text; tokens are the bytes
// (vocabulary 256), targets the next bytes. Throws InputError if the text is shorter than seqLen + 1.
DataSource textDataSource(std::string text, int64_t seqLen, int microBatch, int globalBatch, int dp, uint64_t seed);

// Reads a text file; InputError naming the path when it is missing or empty.
std::string readTextFile(const std::string& path);

} // namespace tessel::exec
