// interruption.h — SIGINT and SIGTERM as a stop request for a long verb (run, calibrate).
#pragma once

#include <chrono>
#include <csignal>
#include <signal.h>
#include <stop_token>
#include <thread>

namespace tpcli {

// SIGINT and SIGTERM during the runs stop the current one between nodes (the handler only sets a
// flag; a watcher thread turns it into a stop request), so that what finished is kept and the
// process exits 128 + the signal; a second signal ends the process at once. Outside the runs, and
// under mpirun, signals act as usual.
class Interruption
{
public:
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
        };
        sigemptyset(&sa.sa_mask);
        for (int sig : {SIGINT, SIGTERM})
            ::sigaction(sig, &sa, &m_old[sig == SIGINT ? 0 : 1]);
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
        m_watcher.request_stop();
        m_watcher.join();
        ::sigaction(SIGINT, &m_old[0], nullptr);
        ::sigaction(SIGTERM, &m_old[1], nullptr);
    }
    Interruption(const Interruption&) = delete;
    Interruption& operator=(const Interruption&) = delete;

    std::stop_token token() const { return m_source.get_token(); }
    int signal() const { return s_signal; }

private:
    static inline volatile std::sig_atomic_t s_signal = 0;
    struct sigaction m_old[2] {};
    bool m_installed = false;
    std::stop_source m_source;
    std::jthread m_watcher;
};

} // namespace tpcli
