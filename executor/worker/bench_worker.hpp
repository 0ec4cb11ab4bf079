// Entry point of `tessel-worker bench` (the microbenchmark rank that `tessel bench` starts under mpirun).
#pragma once

namespace tessel::exec {

// argv[0] is "bench"; returns the process exit code (errors take every rank down through MPI_Abort).
int runBenchWorker(int argc, char** argv);

} // namespace tessel::exec
