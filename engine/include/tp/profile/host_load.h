// host_load.h — how busy other processes kept this host while a run was timed. A run on a shared
// or loaded machine measures the contention, not the plan: its figures (and a speedup against a T=1
// measured at a quieter moment) are suspect, and the record says so.
//
//   HostLoadSampler s;                 // at the start of the timed work
//   … run …
//   const double others = s.otherCores(); // mean cores other processes kept busy; -1: unknown
//
// Linux: the host's busy time from /proc/stat (user, nice, system, irq, softirq, steal) less this
// process's own CPU time (getrusage, every thread), over the wall time between the two samples.
// Steal (a hypervisor running other guests on our cores) counts as others'. Elsewhere, or when
// /proc/stat cannot be read: -1.
#pragma once

#include <chrono>

namespace tp {

class HostLoadSampler
{
public:
    HostLoadSampler();
    // Mean number of cores that processes other than this one kept busy since construction, in
    // [0, logical cores]; -1 when it cannot be measured (no /proc/stat, under 10 ms elapsed).
    double otherCores() const;

private:
    double m_hostBusyS = -1, m_selfS = 0;
    std::chrono::steady_clock::time_point m_start;
};

// Whether `otherCores` of a host with `logicalCores` is enough to disturb timings: more than a
// quarter core, and more than a twentieth of the host.
bool hostWasLoaded(double otherCores, int logicalCores);

} // namespace tp
