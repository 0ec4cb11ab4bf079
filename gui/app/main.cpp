// tessel-gui: explore parallelism plans, see memory and pipeline bubbles, compare with what ran.
#include "app/main_window.hpp"
#include "app/scenario_panel.hpp"
#include "tessel/sim/heap.hpp"

#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>

int main(int argc, char** argv) {
    tessel::sim::retainFreedHeap(); // the search simulates thousands of plans on worker threads
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("tessel-gui"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Explore parallel training plans: memory per stage, pipeline timelines, "
                                                    "step breakdowns, measured runs."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("scenario"), QStringLiteral("Scenario or plan JSON file, or a preset name such as llama3-70b-h100 (default: gpt3-175b-megatron)"));
    QCommandLineOption search(QStringLiteral("search"), QStringLiteral("Start a search right away"));
    QCommandLineOption fix(QStringLiteral("fix"), QStringLiteral("Pinned fields for the search, e.g. tp=8,pp=8"), QStringLiteral("fields"));
    QCommandLineOption measured(QStringLiteral("measured"), QStringLiteral("A measured run's trace.json to overlay (memory.json and scenario.json beside it are read too)"), QStringLiteral("trace"));
    parser.addOptions({search, fix, measured});
    parser.process(app);

    tessel::gui::MainWindow window;
    if (!parser.positionalArguments().isEmpty()) window.openScenarioFile(parser.positionalArguments().first());
    if (parser.isSet(fix)) window.scenarioPanel()->setFixText(parser.value(fix));
    if (parser.isSet(measured)) window.openMeasuredRunWithSiblings(parser.value(measured));
    window.show();
    if (parser.isSet(search)) QTimer::singleShot(0, &window, [&window]() { window.startSearch(); });
    return app.exec();
}
