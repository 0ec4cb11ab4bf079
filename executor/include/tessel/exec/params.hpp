// Model parameters held by one rank: each local tensor is made of slices of named full tensors, so every
// sharding (TP columns or rows, vocab rows, experts) initialises to exactly the values one rank would hold.
#pragma once

#include "tessel/exec/backend.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::exec {

// A rectangle [rowBegin, rowEnd) x [colBegin, colEnd) of the full tensor `fullName` [fullRows, fullCols],
// placed in the local tensor at (localRow, localCol). 1-D parameters are [1, n].
struct ParamPiece {
    std::string fullName;
    int64_t fullRows = 1, fullCols = 1;
    int64_t rowBegin = 0, rowEnd = 1, colBegin = 0, colEnd = 1;
    int64_t localRow = 0, localCol = 0;
};

enum class InitKind { Normal, Ones, Zeros };

// How the data-parallel machinery treats a parameter.
struct ParamInfo {
    std::string name;                 // local name, e.g. "layer.3.attn.q.weight"
    std::vector<ParamPiece> pieces;
    InitKind init = InitKind::Normal;
    double initStd = 0.02;
    bool replicatedOverTp = false;    // same values on every TP rank (norms, row-parallel biases, positions)
    bool expert = false;              // sharded over EP; reduced over the expert data-parallel group
    bool tiedEmbeddingCopy = false;   // the last stage's copy of a tied word embedding
    int layer = -1;                   // global layer index, -1 for embedding / head
    int chunk = 0;                    // model chunk on this rank
};

struct Parameter {
    ParamInfo info;
    Tensor value;   // [rows, cols] local
    Tensor grad;    // same shape; accumulated over micro-batches (undefined when ZeRO shards it away)
};

// The full (unsharded) value of element (row, col) of `fullName` for `seed`: a counter-based normal draw
// (SplitMix64 + Box-Muller) of the element's global index, so it never depends on the sharding.
double initialValue(uint64_t seed, const ParamPiece& piece, int64_t row, int64_t col, InitKind kind, double stdDev);

// Allocates value (Weights) and grad (Grads, zeroed) of every parameter and fills values from the pieces.
void initialiseParameters(Backend& backend, std::vector<Parameter>& params, uint64_t seed, bool allocateGrads);

int64_t localRows(const ParamInfo& info);
int64_t localCols(const ParamInfo& info);

} // namespace tessel::exec
