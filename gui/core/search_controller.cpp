// Runs a plan search on a worker thread; progress and the result come back as queued calls.
#include "core/search_controller.hpp"

#include <QMetaObject>

#include <exception>
#include <memory>

namespace tessel::gui {

QString problemsText(const std::vector<Problem>& problems) {
    QStringList lines;
    for (const Problem& p : problems)
        lines << (p.where.empty() ? QString::fromStdString(p.message)
                                  : QString::fromStdString(p.where) + QStringLiteral(": ") + QString::fromStdString(p.message));
    return lines.join(QLatin1Char('\n'));
}

SearchController::SearchController(QObject* parent) : QObject(parent) {}

SearchController::~SearchController() {
    cancel_ = true;
    joinWorker();
}

void SearchController::joinWorker() {
    if (worker_.joinable()) worker_.join();
}

double SearchController::elapsedSeconds() const { return clock_.isValid() ? static_cast<double>(clock_.elapsed()) / 1e3 : 0.0; }

bool SearchController::start(SearchRequest request) {
    if (running_) return false;
    joinWorker();   // a finished worker whose queued completion has not been delivered yet
    request_ = std::move(request);
    cancel_ = false;
    running_ = true;
    clock_.start();
    emit started();

    // The worker owns copies of everything it reads; it reaches this object only through queued calls
    // whose context is `this`, which Qt drops if the controller is gone (the destructor joins first anyway).
    SearchRequest work = request_;
    work.options.cancel = &cancel_;
    work.options.progress = [this](double fraction) {
        QMetaObject::invokeMethod(
            this, [this, fraction]() { if (running_) emit progressChanged(fraction); }, Qt::QueuedConnection);
    };
    worker_ = std::thread([this, work = std::move(work)]() {
        auto result = std::make_shared<sim::SearchResult>();
        QString error;
        try {
            *result = sim::searchPlans(work.model, work.cluster, work.space, work.options);
        } catch (const InputError& e) {
            error = problemsText(e.problems());
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        QMetaObject::invokeMethod(
            this,
            [this, result, error]() {
                joinWorker();
                running_ = false;
                if (!error.isEmpty()) {
                    emit failed(error);
                    return;
                }
                result_ = std::move(*result);
                emit finished(result_.cancelled);
            },
            Qt::QueuedConnection);
    });
    return true;
}

void SearchController::cancel() {
    if (running_) cancel_ = true;
}

} // namespace tessel::gui
