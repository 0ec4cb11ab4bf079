// Runs a plan search on a worker thread so the window never freezes: progress and the result come back to
// the GUI thread as queued calls; cancel() sets the flag searchPlans polls.
#pragma once

#include "core/search_request.hpp"

#include "tessel/sim/search.hpp"

#include <QElapsedTimer>
#include <QObject>
#include <QString>

#include <atomic>
#include <thread>

namespace tessel::gui {

class SearchController : public QObject {
    Q_OBJECT
public:
    explicit SearchController(QObject* parent = nullptr);
    // Cancels a running search and waits for its thread (searchPlans checks the flag often).
    ~SearchController() override;

    // Starts the search; false (and nothing started) while another one runs.
    bool start(SearchRequest request);
    void cancel();
    bool isRunning() const { return running_; }
    // The last finished search (cancelled ones included: they hold the best plans found so far).
    const sim::SearchResult& result() const { return result_; }
    const SearchRequest& request() const { return request_; }
    double elapsedSeconds() const;

signals:
    void started();
    void progressChanged(double fraction);
    void finished(bool cancelled);
    // searchPlans threw (e.g. InputError for a space it refuses); the message lists every problem.
    void failed(const QString& message);

private:
    void joinWorker();

    SearchRequest request_;
    sim::SearchResult result_;
    std::atomic<bool> cancel_{false};
    std::thread worker_;
    bool running_ = false;
    QElapsedTimer clock_;
};

// One message with every problem of an InputError ("where: message" per line).
QString problemsText(const std::vector<Problem>& problems);

} // namespace tessel::gui
