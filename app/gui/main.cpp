// tpstudio — the TP Studio GUI.
#include "../class_plan_source.h"
#include "models/background.h"
#include "models/settings.h"
#include "widgets/advisor_page.h"
#include "widgets/main_window.h"
#include "widgets/results_page.h"
#include "widgets/run_page.h"
#include "widgets/theme.h"
#include "widgets/verify_dialog.h"

#include "tp/cost/hardware.h"
#include "tp/model/catalog.h"

#include <QApplication>
#include <QComboBox>
#include <QCheckBox>
#include <QCommandLineParser>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QIcon>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSocketNotifier>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTimer>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

namespace {

// Changes the tp size back and forth and reports the GUI-thread time each preview took to reach
// every view: the models' updates plus a synchronous repaint of the window.
void benchmarkRefresh(tpui::MainWindow& window)
{
    auto* sizes = new std::vector<int>{2, 4, 8, 2, 4, 8, 2, 4, 8, 2, 4, 8};
    auto* times = new std::vector<double>;
    auto next = std::make_shared<std::function<void()>>();
    *next = [&window, sizes, times, next] {
        if (sizes->empty()) {
            std::sort(times->begin(), times->end());
            std::printf("tp-size change on %s: GUI-thread time per refresh of all views over %zu changes: min %.2f ms, "
                        "median %.2f ms, max %.2f ms\n",
                        window.spec()->className.c_str(), times->size(), times->front(), (*times)[times->size() / 2],
                        times->back());
            QApplication::exit(0);
            return;
        }
        int t = sizes->front();
        sizes->erase(sizes->begin());
        if (t == window.tpBox()->value()) // no change, no preview: take the next size
            t = t == 8 ? 2 : t * 2;
        window.tpBox()->setValue(t);
    };
    QObject::connect(&window, &tpui::MainWindow::previewApplied, &window, [&window, times, next] {
        if (window.previews()->busy())
            return; // a newer request is on its way
        // Models updated (measured inside applyPreview) + one synchronous repaint of the window.
        QElapsedTimer paint;
        paint.start();
        window.repaint();
        times->push_back(window.lastApplyMs() + double(paint.nsecsElapsed()) / 1e6);
        QTimer::singleShot(0, &window, *next);
    });
    (*next)();
}

// SIGINT, SIGTERM, SIGHUP and SIGQUIT (Ctrl-C in the terminal that started it, a logout, kill)
// close the window as File → Quit does: the run it started is stopped, its temporary folders are
// removed, and the process exits 128 + the signal. The handler only writes the signal to a pipe that
// the event loop reads; a second signal ends the process at once.
int g_signalPipe[2] = {-1, -1};

void onSignal(int sig)
{
    std::signal(sig, SIG_DFL);
    const char c = static_cast<char>(sig);
    [[maybe_unused]] const auto n = ::write(g_signalPipe[1], &c, 1);
}

void quitOnSignals(QApplication& app)
{
    if (::pipe2(g_signalPipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return;
    auto* notifier = new QSocketNotifier(g_signalPipe[0], QSocketNotifier::Read, &app);
    QObject::connect(notifier, &QSocketNotifier::activated, &app, [] {
        char c = 0;
        if (::read(g_signalPipe[0], &c, 1) == 1)
            QApplication::exit(128 + c);
    });
    struct sigaction sa = {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
        ::sigaction(sig, &sa, nullptr);
}

// Why the command line cannot be taken (empty when it can), in tpstudio-cli's words for the same
// mistakes: whole numbers are decimal and in the range the GUI's own box takes, names are one of
// their list, a hardware profile is one `plan preview --hardware` finds, a screenshot goes to a file
// that can be written.
QString badOption(const QCommandLineParser& parser, const QStringList& pages, const QStringList& charts)
{
    const auto number = [&](const QString& name, int lo, int hi) -> QString {
        if (!parser.isSet(name))
            return {};
        const QString v = parser.value(name);
        bool ok = false;
        const qlonglong x = v.toLongLong(&ok, 10);
        static const QRegularExpression decimal(QStringLiteral("^[+-]?[0-9]+$"));
        if (!decimal.match(v).hasMatch())
            return QStringLiteral("--%1: '%2' is not a decimal whole number").arg(name, v.left(40));
        if (!ok || x < lo || x > hi) // too many digits for 64 bits is out of range too, as the CLI says
            return QStringLiteral("--%1: Value %2 not in range %3 to %4").arg(name, v).arg(lo).arg(hi);
        return {};
    };
    const auto member = [&](const QString& name, const QStringList& names) -> QString {
        if (!parser.isSet(name) || names.contains(parser.value(name)))
            return {};
        return QStringLiteral("--%1: %2 not in {%3}").arg(name, parser.value(name).left(40), names.join(QLatin1Char(',')));
    };
    for (const QString& why : {number(QStringLiteral("tp"), 1, 256), number(QStringLiteral("decode"), 0, 4096),
                               number(QStringLiteral("screenshot-opening"), 0, 600000),
                               member(QStringLiteral("tab"), pages), member(QStringLiteral("chart"), charts),
                               member(QStringLiteral("phase"), {QStringLiteral("prefill"), QStringLiteral("decode")})})
        if (!why.isEmpty())
            return why;
    if (parser.isSet(QStringLiteral("run")))
        for (const QString& item : parser.value(QStringLiteral("run")).split(QLatin1Char(','))) {
            bool ok = false;
            const int t = item.toInt(&ok, 10);
            if (!ok || item.trimmed() != item || t < 1 || t > 256)
                return QStringLiteral("--run %1: a comma-separated list of whole numbers from 1 to 256")
                    .arg(parser.value(QStringLiteral("run")).left(80));
        }
    if (parser.isSet(QStringLiteral("hardware")))
        if (auto hw = tp::findHardware(parser.value(QStringLiteral("hardware")).toStdString()); !hw)
            return QString::fromStdString(hw.status().message());
    if (parser.isSet(QStringLiteral("screenshot"))) {
        const QFileInfo shot(parser.value(QStringLiteral("screenshot")));
        if (shot.isDir())
            return QStringLiteral("--screenshot %1: is a folder").arg(shot.filePath());
        if (!shot.dir().exists())
            return QStringLiteral("--screenshot %1: its folder does not exist").arg(shot.filePath());
    }
    for (const char* needs : {"decode", "emulate", "chart", "phase"})
        if (parser.isSet(QLatin1String(needs)) && !parser.isSet(QStringLiteral("run")))
            return QStringLiteral("--%1 needs --run").arg(QLatin1String(needs));
    for (const char* needs : {"verify", "screenshot-opening"})
        if (parser.isSet(QLatin1String(needs)) && !parser.isSet(QStringLiteral("screenshot")))
            return QStringLiteral("--%1 needs --screenshot").arg(QLatin1String(needs));
    return {};
}

// Saves the window (or dialog) as the screenshot; false, with a message, when it cannot be written.
bool saveShot(QWidget* w, const QString& path)
{
    if (w->grab().save(path))
        return true;
    std::fprintf(stderr, "tpstudio: --screenshot %s: cannot write it (a full disk, no permission or an unknown "
                         "image type: use .png)\n",
                 qPrintable(path));
    return false;
}

} // namespace

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    // The tpstudio-cli processes this window starts end with it (tpstudio-cli asks for SIGTERM on
    // its parent's death when the parent is this process).
    qputenv("TPSTUDIO_PARENT_PID", QByteArray::number(qint64(::getpid())));
    quitOnSignals(app);
    tpapp::installClassPlanSource();
    QApplication::setOrganizationName(QStringLiteral("TP Studio"));
    QApplication::setApplicationName(QStringLiteral("tpstudio"));
    QApplication::setApplicationDisplayName(QStringLiteral("TP Studio"));
    QApplication::setApplicationVersion(QStringLiteral(TP_VERSION));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/tpstudio.svg")));
    // Desktop icons where the platform names no theme (Xvfb, minimal sessions).
    if (QIcon::themeName().isEmpty() || QIcon::themeName() == QLatin1String("hicolor"))
        QIcon::setThemeName(QStringLiteral("Adwaita"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Plan and profile tensor parallelism for Transformer language models."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("MODEL"),
                                 QStringLiteral("Folder, config.json, .safetensors, Hugging Face repo id in the local cache, "
                                                "catalog id, or a .tpsession file. Default: the built-in example."));
    QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                  QStringLiteral("Save a PNG of the window once the model (and --run) is done, then quit."),
                                  QStringLiteral("FILE"));
    QCommandLineOption filter(QStringLiteral("filter"), QStringLiteral("Initial module filter."), QStringLiteral("TEXT"));
    QCommandLineOption tab(QStringLiteral("tab"),
                           QStringLiteral("Initial page: summary, plan, shards, dataflow, collectives, diagnostics, run, results, "
                                          "advisor."),
                           QStringLiteral("PAGE"));
    QCommandLineOption tp(QStringLiteral("tp"), QStringLiteral("TP size of the previews."), QStringLiteral("N"));
    QCommandLineOption select(QStringLiteral("select"), QStringLiteral("Select this module or parameter."), QStringLiteral("PATH"));
    QCommandLineOption run(QStringLiteral("run"), QStringLiteral("Run the plan for these tp sizes once the model is open."),
                           QStringLiteral("SIZES"));
    QCommandLineOption hardware(QStringLiteral("hardware"), QStringLiteral("Hardware profile of the previews."),
                                QStringLiteral("ID"));
    QCommandLineOption emulate(QStringLiteral("emulate"),
                               QStringLiteral("With --run: emulate every rank on one device, communication modelled with --hardware."));
    QCommandLineOption chart(QStringLiteral("chart"),
                             QStringLiteral("Results chart after --run: layers, speedup, latency, timeline, compare, collectives."),
                             QStringLiteral("CHART"));
    QCommandLineOption decode(QStringLiteral("decode"), QStringLiteral("With --run: greedy decode steps after each prefill."),
                              QStringLiteral("STEPS"));
    QCommandLineOption phase(QStringLiteral("phase"),
                             QStringLiteral("Results phase after --run: prefill or decode (per layer, timeline, compare)."),
                             QStringLiteral("PHASE"));
    QCommandLineOption bench(QStringLiteral("benchmark-refresh"),
                             QStringLiteral("Print the GUI-thread time of refreshing every view on tp-size changes, then quit."));
    QCommandLineOption shootOpening(QStringLiteral("screenshot-opening"),
                                    QStringLiteral("With --screenshot: save it MS milliseconds after MODEL starts opening, while it "
                                                   "still opens (the progress state), then quit; an error if it opened sooner."),
                                    QStringLiteral("MS"));
    QCommandLineOption verify(QStringLiteral("verify"),
                              QStringLiteral("With --screenshot: Run > Verify with Transformers at --tp (the Python of "
                                             "TPSTUDIO_PYTHON), and save a PNG of the dialog when it is done."));
    QCommandLineOption theme(QStringLiteral("theme"),
                             QStringLiteral("Appearance: system (the platform's palette), light or dark; View > Theme "
                                            "remembers the choice, this option only applies to this start."),
                             QStringLiteral("THEME"));
    for (const auto& o : {screenshot, filter, tab, tp, select, run, chart, hardware, emulate, decode, phase, bench, shootOpening, verify, theme})
        parser.addOption(o);
    parser.process(app);
    const QStringList pages{QStringLiteral("summary"), QStringLiteral("plan"), QStringLiteral("shards"), QStringLiteral("dataflow"),
                            QStringLiteral("collectives"), QStringLiteral("diagnostics"), QStringLiteral("run"), QStringLiteral("results"),
                            QStringLiteral("advisor")};
    const QStringList charts{QStringLiteral("layers"), QStringLiteral("speedup"), QStringLiteral("latency"), QStringLiteral("timeline"),
                             QStringLiteral("compare"), QStringLiteral("collectives")};
    if (parser.isSet(theme) && tpui::themeName(tpui::themeFromName(parser.value(theme))) != parser.value(theme)) {
        std::fprintf(stderr, "tpstudio: --theme must be system, light or dark, not '%s'\n", qPrintable(parser.value(theme)));
        return 1;
    }
    if (const QString why = badOption(parser, pages, charts); !why.isEmpty()) {
        std::fprintf(stderr, "tpstudio: %s\nRun with --help for more information.\n", qPrintable(why));
        return 2;
    }
    tpui::applyTheme(tpui::themeFromName(parser.isSet(theme) ? parser.value(theme) : tpui::Settings::theme()));

    // Destroyed before main returns (below), so that nothing of the window outlives it.
    std::optional<tpui::MainWindow> windowHolder;
    tpui::MainWindow& window = windowHolder.emplace();
    const QStringList args = parser.positionalArguments();
    const QString model = args.isEmpty() ? QString::fromLatin1(tp::kExampleModelId.data(), qsizetype(tp::kExampleModelId.size()))
                                         : args.first();
    std::function<void()> shoot = [&] {
        QTimer::singleShot(500, &window, [&] { QApplication::exit(saveShot(&window, parser.value(screenshot)) ? 0 : 1); });
    };
    bool started = false;
    QObject::connect(&window, &tpui::MainWindow::previewApplied, &window, [&] {
        if (started || !window.spec() || parser.isSet(shootOpening))
            return;
        started = true;
        if (parser.isSet(filter))
            window.filterEdit()->setText(parser.value(filter));
        if (parser.isSet(select))
            window.selectPath(parser.value(select));
        // On the Advisor, the shot waits for the candidates, searched once the page shows.
        const bool advisorShot = parser.isSet(screenshot) && !parser.isSet(run) && parser.value(tab) == QLatin1String("advisor");
        if (advisorShot)
            QObject::connect(window.advisorPage(), &tpui::AdvisorPage::searchFinished, &window, [&] { shoot(); },
                             Qt::SingleShotConnection);
        if (parser.isSet(tab))
            window.tabs()->setCurrentIndex(std::max<qsizetype>(0, pages.indexOf(parser.value(tab))));
        if (advisorShot)
            return;
        if (parser.isSet(bench))
            return benchmarkRefresh(window);
        if (parser.isSet(verify) && parser.isSet(screenshot)) {
            window.verifyAction()->trigger();
            auto* dialog = window.findChild<tpui::VerifyDialog*>();
            QObject::connect(dialog, &tpui::VerifyDialog::done, dialog, [&, dialog](bool ok) {
                QTimer::singleShot(300, dialog, [&, dialog, ok] {
                    QApplication::exit(saveShot(dialog, parser.value(screenshot)) && ok ? 0 : 1);
                });
            });
            dialog->start();
            return;
        }
        if (parser.isSet(run)) {
            window.runPage()->tpSizes()->setText(parser.value(run));
            window.runPage()->emulateBox()->setChecked(parser.isSet(emulate));
            if (parser.isSet(decode))
                window.runPage()->decodeBox()->setValue(parser.value(decode).toInt());
            window.runPage()->start();
            return;
        }
        if (parser.isSet(screenshot))
            shoot();
    });
    if (parser.isSet(run) && parser.isSet(screenshot)) {
        QObject::connect(window.runPage(), &tpui::RunPage::runFinished, &window, [&] {
            if (parser.isSet(tab))
                window.tabs()->setCurrentIndex(std::max<qsizetype>(0, pages.indexOf(parser.value(tab))));
            if (parser.value(phase) == QLatin1String("decode"))
                window.resultsPage()->phaseBox()->setCurrentIndex(1);
            if (parser.isSet(chart))
                window.resultsPage()->tabs()->setCurrentIndex(std::max<qsizetype>(0, charts.indexOf(parser.value(chart))));
            if (parser.value(chart) == QLatin1String("compare"))
                window.resultsPage()->setBaseline(window.resultsPage()->run());
            if (parser.value(chart) == QLatin1String("collectives")) { // local, then MPI when mpirun exists
                auto rounds = std::make_shared<int>(0);
                QObject::connect(window.resultsPage(), &tpui::ResultsPage::benchmarkFinished, &window, [&, rounds] {
                    if ((*rounds)++ == 0 && !QStandardPaths::findExecutable(QStringLiteral("mpirun")).isEmpty())
                        window.resultsPage()->runBenchmark(QStringLiteral("mpi"));
                    else
                        shoot();
                });
                window.resultsPage()->runBenchmark(QStringLiteral("local"));
                return;
            }
            shoot();
        });
        QObject::connect(window.runPage(), &tpui::RunPage::runFailed, &window, [](const QString& m) {
            qCritical("%s", qPrintable(m));
            QApplication::exit(1);
        });
    }
    if (parser.isSet(screenshot) || parser.isSet(bench)) {
        window.setShowErrorDialogs(false);
        QObject::connect(&window, &tpui::MainWindow::loadFailed, &window, [](const QString& msg) {
            qCritical("%s", qPrintable(msg));
            QApplication::exit(1);
        });
    }
    if (parser.isSet(tp))
        window.tpBox()->setValue(parser.value(tp).toInt());
    if (parser.isSet(hardware)) {
        tpui::PreviewSettings s = window.document()->settings();
        s.hardware = parser.value(hardware);
        window.document()->setSettings(s);
    }
    window.show();
    if (model.endsWith(QLatin1String(".tpsession")))
        window.openSession(model);
    else
        window.openModel(model);
    if (parser.isSet(screenshot) && parser.isSet(shootOpening))
        QTimer::singleShot(std::max(0, parser.value(shootOpening).toInt()), &window, [&] {
            if (!window.isOpening()) {
                qCritical("%s opened before the screenshot: nothing is opening", qPrintable(model));
                QApplication::exit(1);
                return;
            }
            QApplication::exit(saveShot(&window, parser.value(screenshot)) ? 0 : 1);
        });
    const int rc = QApplication::exec();
    windowHolder.reset(); // a run's child process is killed; an open still in progress is abandoned
    if (tpui::backgroundTasksInFlight() > 0) {
        // An abandoned open (or preview) cannot be interrupted inside the engine, and it must neither
        // hold the process nor run while static objects are destroyed under it. Settings and the
        // session were written when the window closed.
        std::fflush(nullptr);
        std::_Exit(rc);
    }
    return rc;
}
