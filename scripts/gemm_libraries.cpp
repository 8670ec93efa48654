// gemm_libraries.cpp — the CPU math library choice, measured: OpenBLAS, BLIS and oneDNN SGEMM on the
// CPU engine's GEMM shapes (the example model's Linear layers at T = 1 and 2, S = 128, 512, 2048, a
// decode row, a 2048³ square), one thread each, rounds interleaved, medians. Built and run by
// scripts/bench_gemm_libraries.sh; each library is dlopen'ed with RTLD_DEEPBIND so that their
// identical cblas symbols do not meet.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Cblas = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using Dnnl = int (*)(char, char, long, long, long, float, const float*, long, const float*, long, float, float*, long);

struct Lib
{
    std::string name, kernel;
    Cblas cblas = nullptr;
    Dnnl dnnl = nullptr;
    void run(int m, int n, int k, const float* x, const float* w, float* y) const
    {
        if (cblas)
            cblas(101 /*row major*/, 111 /*no trans*/, 112 /*trans*/, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
        else
            dnnl('N', 'T', m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
    }
};

struct Shape
{
    const char* what;
    int m, n, k;
};

} // namespace

int main(int argc, char** argv)
{
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
    // One thread each, as the engine runs one rank per core: oneDNN's OpenMP and BLIS read these
    // when they are loaded.
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("BLIS_NUM_THREADS", "1", 1);
    std::vector<Lib> libs;
    if (void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)) {
        auto core = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"));
        reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))(1);
        libs.push_back({"OpenBLAS", core ? core() : "?", reinterpret_cast<Cblas>(dlsym(h, "cblas_sgemm")), nullptr});
    }
    if (void* h = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)) {
        auto query = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
        auto str = reinterpret_cast<const char* (*)(int)>(dlsym(h, "bli_arch_string"));
        if (auto set = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads")))
            set(1);
        libs.push_back({"BLIS", query && str ? str(query()) : "?", reinterpret_cast<Cblas>(dlsym(h, "cblas_sgemm")), nullptr});
    }
    if (void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL)) {
        auto isa = reinterpret_cast<int (*)()>(dlsym(h, "dnnl_get_effective_cpu_isa"));
        libs.push_back({"oneDNN", isa ? "isa mask 0x" + [](int v) { char b[16]; std::snprintf(b, sizeof b, "%x", v); return std::string(b); }(isa()) : "?",
                        nullptr, reinterpret_cast<Dnnl>(dlsym(h, "dnnl_sgemm"))});
    }
    for (auto it = libs.begin(); it != libs.end();)
        it = (it->cblas || it->dnnl) ? it + 1 : libs.erase(it);
    if (libs.empty()) {
        std::fprintf(stderr, "none of libopenblas.so.0, libblis.so.4, libdnnl.so.2 could be opened\n");
        return 1;
    }
    // The example model (hidden 512, 8 heads of 64, 4 kv heads, MLP 1536, vocab 32000): q/o, k/v,
    // gate/up, down and the LM head; T=2 halves the colwise outputs and the rowwise inputs.
    std::vector<Shape> shapes;
    for (int S : {128, 512, 2048}) {
        for (const Shape s : {Shape{"q,o T=1", S, 512, 512}, Shape{"k,v T=1", S, 256, 512}, Shape{"gate,up T=1", S, 1536, 512},
                              Shape{"down T=1", S, 512, 1536}, Shape{"lm_head T=1", S, 32000, 512}, Shape{"q T=2", S, 256, 512},
                              Shape{"o T=2", S, 512, 256}, Shape{"gate,up T=2", S, 768, 512}, Shape{"down T=2", S, 512, 768},
                              Shape{"lm_head T=2", S, 16000, 512}})
            shapes.push_back(s);
    }
    shapes.push_back({"decode q", 1, 512, 512});
    shapes.push_back({"decode lm_head", 1, 32000, 512});
    shapes.push_back({"square", 2048, 2048, 2048});
    std::vector<float> x(2048 * 2048), w(32000 * 2048), y(2048 * 32000);
    for (std::size_t i = 0; i < w.size(); ++i)
        w[i] = float(int(i % 17) - 8) * 0.01f;
    for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = float(int(i % 13) - 6) * 0.01f;
    std::vector<std::vector<std::vector<double>>> g(shapes.size(), std::vector<std::vector<double>>(libs.size()));
    for (int r = 0; r < rounds; ++r)
        for (std::size_t s = 0; s < shapes.size(); ++s)
            for (std::size_t l = 0; l < libs.size(); ++l) {
                const Shape& sh = shapes[s];
                const double flops = 2.0 * sh.m * sh.n * sh.k;
                const int reps = std::max(3, int(1e9 / flops));
                libs[l].run(sh.m, sh.n, sh.k, x.data(), w.data(), y.data());
                std::vector<double> t;
                for (int i = 0; i < reps; ++i) {
                    const auto t0 = std::chrono::steady_clock::now();
                    libs[l].run(sh.m, sh.n, sh.k, x.data(), w.data(), y.data());
                    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                }
                std::sort(t.begin(), t.end());
                g[s][l].push_back(flops / t[t.size() / 2] / 1e9);
            }
    std::printf("SGEMM GFLOP/s, one thread, median of %d interleaved rounds (OPENBLAS_CORETYPE=%s)\n", rounds,
                std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");
    for (const Lib& l : libs)
        std::printf("  %-9s %s\n", l.name.c_str(), l.kernel.c_str());
    std::printf("%-16s %5s %6s %5s", "shape", "M", "N", "K");
    for (const Lib& l : libs)
        std::printf(" %9s", l.name.c_str());
    std::printf("\n");
    std::vector<double> seconds(libs.size());
    for (std::size_t s = 0; s < shapes.size(); ++s) {
        std::printf("%-16s %5d %6d %5d", shapes[s].what, shapes[s].m, shapes[s].n, shapes[s].k);
        for (std::size_t l = 0; l < libs.size(); ++l) {
            auto v = g[s][l];
            std::sort(v.begin(), v.end());
            std::printf(" %9.1f", v[v.size() / 2]);
            seconds[l] += 2.0 * shapes[s].m * shapes[s].n * shapes[s].k / (v[v.size() / 2] * 1e9);
        }
        std::printf("\n");
    }
    std::printf("%-35s", "time over all shapes (s)");
    for (double t : seconds)
        std::printf(" %9.3f", t);
    std::printf("\n");
}
