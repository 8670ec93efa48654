// host_load.cpp — other processes' CPU time while a run was timed (host_load.h).
#include "tp/profile/host_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace tp {

namespace {

// The host's busy seconds since boot, summed over its CPUs (/proc/stat's "cpu" line: user nice
// system idle iowait irq softirq steal; guest time is already inside user), and how many CPUs it
// sums. -1 when it cannot be read.
double hostBusySeconds(int* cpus = nullptr)
{
    std::ifstream in("/proc/stat");
    std::string line;
    if (!std::getline(in, line) || !line.starts_with("cpu "))
        return -1;
    std::istringstream fields(line.substr(4));
    double v[8] = {};
    for (double& x : v)
        if (!(fields >> x))
            return -1;
    if (cpus) {
        *cpus = 0;
        while (std::getline(in, line) && line.starts_with("cpu"))
            ++*cpus;
    }
    const long tick = ::sysconf(_SC_CLK_TCK);
    if (tick <= 0)
        return -1;
    const double busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return busy / double(tick);
}

double selfSeconds()
{
    rusage u{};
    if (::getrusage(RUSAGE_SELF, &u) != 0)
        return 0;
    auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
    return s(u.ru_utime) + s(u.ru_stime);
}

} // namespace

HostLoadSampler::HostLoadSampler()
    : m_hostBusyS(hostBusySeconds())
    , m_selfS(selfSeconds())
    , m_start(std::chrono::steady_clock::now())
{
}

double HostLoadSampler::otherCores() const
{
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    int cpus = 0;
    const double busy = hostBusySeconds(&cpus);
    if (m_hostBusyS < 0 || busy < 0 || cpus <= 0 || wall < 0.01)
        return -1;
    // /proc/stat counts in clock ticks and getrusage in microseconds: over a short run the
    // difference can dip below zero, or the host's count lag ours by a tick per CPU.
    const double others = ((busy - m_hostBusyS) - (selfSeconds() - m_selfS)) / wall;
    return std::clamp(others, 0.0, double(cpus));
}

bool hostWasLoaded(double otherCores, int logicalCores)
{
    return otherCores > std::max(0.25, 0.05 * std::max(1, logicalCores));
}

} // namespace tp
