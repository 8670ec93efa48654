// no_mpi.cpp — the MPI entry points of a build without MPI.
#include "tp/runtime/communicator.h"

namespace tp {

std::unique_ptr<Communicator> makeMpiCommunicator(std::chrono::milliseconds) { return nullptr; }
bool mpiInit(int*, char***) { return false; }
void mpiFinalize() {}
void mpiAbortJob(int) {}
int mpiLocalRank() { return 0; }
bool haveMpi() { return false; }

} // namespace tp
