// interruption.h — SIGINT, SIGTERM, SIGHUP and SIGQUIT as a stop request for a long verb (run,
// calibrate, bench load, plan verify).
#pragma once

#include <chrono>
#include <csignal>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <cstdlib>
#include <stop_token>
#include <thread>

namespace tpcli {

// Each of kSignals during the runs stops the current one between nodes (the handler only sets a
// flag; a watcher thread turns it into a stop request), so that what finished is kept, temporary
// files are removed and the process exits 128 + the signal; a second signal ends the process at
// once. A closed terminal (SIGHUP) or a quit key (SIGQUIT) is an interrupt like Ctrl-C. While a
// child process group runs (forwardTo: plan verify's Python, torchrun and its ranks), the interrupt
// is passed on to it as SIGINT. Outside the runs, and under mpirun, signals act as usual.
class Interruption
{
public:
    static constexpr int kSignals[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

    explicit Interruption(bool enable)
    {
        if (!enable)
            return;
        s_signal = 0;
        struct sigaction sa {};
        sa.sa_handler = [](int sig) {
            if (s_signal != 0) { // a second one: the default action (ends the process at once)
                std::signal(sig, SIG_DFL);
                std::raise(sig);
            }
            s_signal = sig;
            if (s_group > 0)
                ::kill(-static_cast<pid_t>(s_group), SIGINT);
        };
        sigemptyset(&sa.sa_mask);
        for (int i = 0; i < 4; ++i)
            ::sigaction(kSignals[i], &sa, &m_old[i]);
        m_installed = true;
        m_watcher = std::jthread([this](std::stop_token st) {
            while (!st.stop_requested() && s_signal == 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (s_signal != 0)
                m_source.request_stop();
        });
    }
    ~Interruption()
    {
        if (!m_installed)
            return;
        s_group = 0;
        m_watcher.request_stop();
        m_watcher.join();
        for (int i = 0; i < 4; ++i)
            ::sigaction(kSignals[i], &m_old[i], nullptr);
    }
    Interruption(const Interruption&) = delete;
    Interruption& operator=(const Interruption&) = delete;

    std::stop_token token() const { return m_source.get_token(); }
    int signal() const { return s_signal; }
    // The process group an interrupt is passed on to (0: none). One that came before it was set is
    // passed on at once.
    void forwardTo(pid_t group)
    {
        s_group = group;
        if (group > 0 && s_signal != 0)
            ::kill(-group, SIGINT);
    }

private:
    static inline volatile std::sig_atomic_t s_signal = 0;
    static inline volatile std::sig_atomic_t s_group = 0;
    struct sigaction m_old[4] {};
    bool m_installed = false;
    std::stop_source m_source;
    std::jthread m_watcher;
};

// In a child this program starts (bench gemm's peak measurement): ends it when its parent ends,
// however that ends (SIGKILL included), so that no child outlives the command (Linux).
inline void dieWithParent()
{
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == 1) // the parent was gone before the request
        std::_Exit(1);
}

} // namespace tpcli
