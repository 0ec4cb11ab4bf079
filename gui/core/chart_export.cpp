// Saves the three charts of a plan as one PNG or SVG image.
#include "core/chart_export.hpp"

#include "core/chart_painters.hpp"
#include "core/palette.hpp"

#include <QFileInfo>
#include <QFontMetricsF>
#include <QImage>
#include <QPainter>

#ifdef TESSEL_GUI_HAVE_SVG
#include <QSvgGenerator>
#endif

namespace tessel::gui {

bool svgExportAvailable() {
#ifdef TESSEL_GUI_HAVE_SVG
    return true;
#else
    return false;
#endif
}

void paintChartSet(QPainter& p, const QSize& size, ChartSet set) {
    const double w = size.width();
    const double h = size.height();
    p.fillRect(QRectF(0, 0, w, h), Qt::white);
    const QFontMetricsF fm(p.font());
    double top = 0.0;
    if (!set.title.isEmpty()) {
        QFont bold = p.font();
        bold.setBold(true);
        p.save();
        p.setFont(bold);
        p.setPen(textColor());
        p.drawText(QRectF(8.0, 4.0, w - 16.0, fm.height() + 4.0), Qt::AlignLeft | Qt::AlignVCenter, set.title);
        p.restore();
        top = fm.height() + 10.0;
    }
    const double chartsHeight = (h - top) * 0.45;
    paintMemoryChart(p, QRectF(0, top, w * 0.42, chartsHeight), set.memory);
    paintBreakdown(p, QRectF(w * 0.42, top, w * 0.58, chartsHeight), set.breakdown);
    const double legendH = timelineLegendHeight(fm, w, set.timeline.hasLane(TimelineLane::Measured));
    paintTimelineLegend(p, QRectF(0, top + chartsHeight, w, legendH), set.timeline.hasLane(TimelineLane::Measured));
    set.timeline.setViewport(w, h - top - chartsHeight - legendH);
    p.save();
    p.translate(0, top + chartsHeight + legendH);
    p.setClipRect(QRectF(0, 0, w, h - top - chartsHeight - legendH));
    paintTimeline(p, set.timeline);
    p.restore();
}

QString exportCharts(const QString& path, const ChartSet& set, const QSize& size) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("svg")) {
#ifdef TESSEL_GUI_HAVE_SVG
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(size);
        svg.setViewBox(QRect(QPoint(0, 0), size));
        svg.setTitle(set.title.isEmpty() ? QStringLiteral("tessel plan") : set.title);
        svg.setDescription(QStringLiteral("memory per stage, step breakdown and pipeline timeline, by tessel-gui"));
        QPainter p;
        if (!p.begin(&svg)) return QStringLiteral("cannot write %1").arg(path);
        paintChartSet(p, size, set);
        p.end();
        return QFileInfo::exists(path) ? QString() : QStringLiteral("cannot write %1").arg(path);
#else
        return QStringLiteral("this build has no SVG support (install qt6-svg-dev and rebuild); save as .png instead");
#endif
    }
    if (suffix != QLatin1String("png")) return QStringLiteral("unknown image format \"%1\": use .png or .svg").arg(suffix);
    QImage image(size, QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::white);
    {
        QPainter p(&image);
        p.setRenderHint(QPainter::TextAntialiasing, true);
        paintChartSet(p, size, set);
    }
    if (!image.save(path, "PNG")) return QStringLiteral("cannot write %1").arg(path);
    return {};
}

} // namespace tessel::gui
