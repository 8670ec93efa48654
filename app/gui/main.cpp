// tpstudio — the TP Studio GUI.
#include "widgets/main_window.h"

#include "tp/model/catalog.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QLineEdit>
#include <QTabWidget>
#include <QTimer>

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
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
                                                "or catalog id. Default: the built-in example."));
    QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                  QStringLiteral("Save a PNG of the window once the model is open, then quit."),
                                  QStringLiteral("FILE"));
    QCommandLineOption filter(QStringLiteral("filter"), QStringLiteral("Initial module filter."), QStringLiteral("TEXT"));
    QCommandLineOption tab(QStringLiteral("tab"), QStringLiteral("Initial tab index on the right."), QStringLiteral("N"));
    parser.addOption(screenshot);
    parser.addOption(filter);
    parser.addOption(tab);
    parser.process(app);

    tpui::MainWindow window;
    const QStringList args = parser.positionalArguments();
    const QString model = args.isEmpty() ? QString::fromLatin1(tp::kExampleModelId.data(), qsizetype(tp::kExampleModelId.size()))
                                         : args.first();
    QObject::connect(&window, &tpui::MainWindow::modelLoaded, &window, [&] {
        if (parser.isSet(filter))
            window.filterEdit()->setText(parser.value(filter));
        if (parser.isSet(tab))
            window.tabs()->setCurrentIndex(parser.value(tab).toInt());
        if (parser.isSet(screenshot))
            QTimer::singleShot(300, &window, [&] {
                const bool ok = window.grab().save(parser.value(screenshot));
                QApplication::exit(ok ? 0 : 1);
            });
    });
    if (parser.isSet(screenshot)) {
        window.setShowErrorDialogs(false);
        QObject::connect(&window, &tpui::MainWindow::loadFailed, &window, [](const QString& msg) {
            qCritical("%s", qPrintable(msg));
            QApplication::exit(1);
        });
    }
    window.show();
    window.openModel(model);
    return QApplication::exec();
}
